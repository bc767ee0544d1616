"""DQN on CartPole-v1, the main job: an application of the replay buffer library.

``mindspore-rl-buffer train`` (:mod:`.cli`) trains DQN with the buffer declared in
``configs/dqn.py``, built by :func:`mindspore_rl_buffer.create_buffer` and compiled into the
training graphs, so the host only launches them:

* collect (:class:`~.collect.CollectStep`): epsilon-greedy policy, one step of the batched
  MindSpore CartPole, and ``_ = self.buffer.insert(...)``;
* learn (:class:`~.learner.LearnStep`): ``self.buffer.sample()``, the (Double) DQN Huber
  loss, an Adam update and the periodic hard copy into the target network;
* the fused loop (:class:`~.fused.TrainLoop`, the default): many collect steps, each followed
  by its learn steps, in one graph ``while`` loop, one launch per progress-bar update; the
  evaluation (:class:`~.evaluation.EvalLoop`) plays all its episodes in one launch.

``mindspore-rl-buffer evaluate --checkpoint PATH`` (:mod:`.play`) plays a trained agent.

One responsibility per module:

=================  ==========================================================================
module             what
=================  ==========================================================================
``cartpole``       CartPole-v1 in MindSpore ops, batched, checked against gymnasium
``draws``          uniform draws from an operator MindSpore 2.10 does not deprecate
``config``         the trainer's config checks (sections, settings, environment, buffer columns)
``networks``       :class:`~.networks.QNetwork`, :func:`~.networks.copy_weights`, its checkpoint
``optimizer``      :class:`~.optimizer.Adam` on the dense ``Adam`` kernel
``policy``         epsilon-greedy and greedy policies
``collect``        the collect graph (:class:`~.collect.ActStep`, :class:`~.collect.CollectStep`)
``learner``        the learn graph (:class:`~.learner.DQNLoss`, :class:`~.learner.Update`,
                   :class:`~.learner.LearnStep`)
``fused``          the fused training graph (:class:`~.fused.TrainLoop`)
``numpy_buffer``   :class:`~.numpy_buffer.NumpyReplayBuffer`, the host-side baseline
``collectors``     the three ways to collect (device, device env with numpy buffer, gymnasium)
``evaluation``     greedy evaluation: in one graph, one launch per step, or on gymnasium
``agent``          :func:`~.agent.build_agent`: every Cell of a run, from the config
``schedule``       when the loop learns, logs and evaluates, cut into launches
``loops``          the fused and the host loop
``trainer``        :func:`~.trainer.train`: the chunks, the held solve, the output folder
``play``           evaluating a checkpoint, frames of an episode
``progress``       the progress bar (tqdm, or a silent stand-in)
``plotting``       the learning curve
``extras``         the ``dqn`` extra (matplotlib, tqdm): checks and the error when one is missing
``cli``            the ``mindspore-rl-buffer`` command line
``compile_cache``  ``--compile-cache``: MindSpore's compile cache, one folder per run setting
``runtime``        the CPU runtime's threads: two actor threads where MindSpore's default gives one
=================  ==========================================================================
"""
from mindspore_rl_buffer.apps.dqn.config import check_config
from mindspore_rl_buffer.apps.dqn.trainer import DQNAgent, TrainResult, build_agent, train

__all__ = ["DQNAgent", "TrainResult", "build_agent", "check_config", "train"]
