"""DQN on CartPole with the replay buffer compiled into the training graphs.

The main path runs two compiled graphs and no host round-trip per step:

* :class:`CollectStep`: epsilon-greedy policy, one step of the batched MindSpore
  :class:`~mindspore_rl_buffer.apps.dqn.cartpole.CartPole`, and ``_ = self.buffer.insert(...)``.
* :class:`LearnStep`: ``self.buffer.sample()``, the (Double) DQN Huber loss, an Adam update,
  and the periodic hard copy into the target network.

The host only launches them, and reads the losses and episode returns once per progress-bar
update and per evaluation. Two variants feed the same :class:`Update` graph differently:
``buffer='numpy'`` samples a :class:`NumpyReplayBuffer` on the host and converts the batch
(the baseline for the benchmark), and ``env='gymnasium'`` steps gymnasium's CartPole-v1 on
the host and inserts each step through the buffer's direct-call path.

A transition is ``(state, action, reward, next_state, terminated)``: see ``configs/dqn.py``.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, jit, nn, ops

from mindspore_rl_buffer.apps.dqn.cartpole import NUM_ACTIONS, OBSERVATION_SIZE, CartPole
from mindspore_rl_buffer.config import create_buffer
from mindspore_rl_buffer.py_uniform import ring_insert
from mindspore_rl_buffer.replay_buffer import ReplayBuffer
from mindspore_rl_buffer.specs import numpy_dtype

_SECTIONS = ("replay_buffer", "learner", "policy", "environment", "trainer")


# --------------------------------------------------------------------------- config
def check_config(config: dict[str, Any]) -> None:
    """Check what the DQN trainer relies on: its sections, the environment and the buffer's columns.

    Raises:
        ValueError: Naming the first missing section, an environment other than
            CartPole-v1, or buffer columns other than (state, action, reward, next_state,
            terminated).
    """
    for section in _SECTIONS:
        if section not in config:
            raise ValueError(f"For 'train', the algorithm config must have a '{section}' entry, "
                             f"but it has {sorted(config)}.")
    name = config["environment"].get("name", "CartPole-v1")
    if name != "CartPole-v1":
        raise ValueError(f"For 'train', 'environment.name' must be 'CartPole-v1' (the only environment "
                         f"implemented), but got {name!r}.")
    shapes = [tuple(s) for s in config["replay_buffer"]["data_shape"]]
    expected = [(OBSERVATION_SIZE,), (1,), (1,), (OBSERVATION_SIZE,), (1,)]
    if shapes != expected:
        raise ValueError(f"For 'train', the replay buffer's 'data_shape' must be {expected} (state, action, "
                         f"reward, next_state, terminated), but got {shapes}.")


# --------------------------------------------------------------------------- networks
class QNetwork(nn.Cell):
    """A multilayer perceptron from observations to one Q-value per action.

    Args:
        observation_size (int): Inputs.
        num_actions (int): Outputs.
        hidden_sizes (Sequence[int]): Widths of the ReLU hidden layers. Default: ``(128, 128)``.

    Inputs:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.

    Outputs:
        Tensor, float32, ``(n, num_actions)``.
    """

    def __init__(self, observation_size: int, num_actions: int, hidden_sizes: Sequence[int] = (128, 128)):
        super().__init__()
        layers: list[nn.Cell] = []
        width = observation_size
        for hidden in hidden_sizes:
            layers += [nn.Dense(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Dense(width, num_actions))
        self.layers = nn.SequentialCell(layers)

    def construct(self, observation):
        return self.layers(observation)


def copy_weights(source: nn.Cell, target: nn.Cell) -> None:
    """Copy ``source``'s parameters into ``target``'s, in place (host side, before compiling)."""
    for src, dst in zip(source.get_parameters(), target.get_parameters()):
        dst.set_data(src.data.copy())


class EpsilonGreedy(nn.Cell):
    """Epsilon-greedy actions over a Q-network; epsilon decays linearly with the steps taken.

    The number of environment steps taken so far lives in the ``steps`` Parameter, so the
    schedule needs nothing from the host.

    Args:
        q_net (nn.Cell): Maps observations to Q-values.
        epsilon_start (float): Epsilon at step 0.
        epsilon_end (float): Epsilon after ``epsilon_decay_steps`` environment steps.
        epsilon_decay_steps (int): Length of the linear decay.

    Inputs:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.

    Outputs:
        Tensor, int32, ``(n,)``: the actions.
    """

    def __init__(self, q_net: nn.Cell, epsilon_start: float, epsilon_end: float, epsilon_decay_steps: int):
        super().__init__()
        self.q_net = q_net
        self.epsilon_start = float(epsilon_start)
        self.epsilon_end = float(epsilon_end)
        self.epsilon_decay_steps = float(max(int(epsilon_decay_steps), 1))
        self.steps = Parameter(Tensor(0, ms.int32), name="policy_steps", requires_grad=False)
        self._zero = Tensor(0, ms.int32)
        self._num_actions = Tensor(NUM_ACTIONS, ms.int32)

    def epsilon(self):
        """The current epsilon, a float32 scalar tensor."""
        fraction = ops.minimum(self.steps.astype(ms.float32) / self.epsilon_decay_steps, 1.0)
        return self.epsilon_start + fraction * (self.epsilon_end - self.epsilon_start)

    def construct(self, observation):
        n = observation.shape[0]
        greedy = ops.argmax(self.q_net(observation), dim=1).astype(ms.int32)
        random_action = ops.uniform((n,), self._zero, self._num_actions, dtype=ms.int32)
        explore = ops.rand((n,), dtype=ms.float32) < self.epsilon()
        ops.assign(self.steps, self.steps + n)
        return ops.where(explore, random_action, greedy)


class GreedyAction(nn.Cell):
    """The greedy action of a Q-network, int32 ``(n,)``: the evaluation policy."""

    def __init__(self, q_net: nn.Cell):
        super().__init__()
        self.q_net = q_net

    def construct(self, observation):
        return ops.argmax(self.q_net(observation), dim=1).astype(ms.int32)


# --------------------------------------------------------------------------- collect
class EpisodeTracker(nn.Cell):
    """Running returns of a batch of environments, and the total over finished episodes.

    ``finished_return`` (float32) and ``finished_episodes`` (int32) only grow; the host reads
    them once per progress-bar update and takes differences.
    """

    def __init__(self, num_envs: int):
        super().__init__()
        self.episode_return = Parameter(Tensor(np.zeros(num_envs, np.float32)), name="episode_return",
                                        requires_grad=False)
        self.finished_return = Parameter(Tensor(0.0, ms.float32), name="finished_return", requires_grad=False)
        self.finished_episodes = Parameter(Tensor(0, ms.int32), name="finished_episodes", requires_grad=False)

    def construct(self, reward, done):
        running = self.episode_return + reward
        done_f = done.astype(ms.float32)
        ops.assign(self.finished_return, self.finished_return + (running * done_f).sum())
        finished = done.astype(ms.int32).sum().astype(ms.int32)
        ops.assign(self.finished_episodes, self.finished_episodes + finished)
        ops.assign(self.episode_return, running * (1.0 - done_f))
        return done_f

    def read(self) -> tuple[float, int]:
        """Host read: total return of the finished episodes, and how many finished."""
        return float(self.finished_return.asnumpy()), int(self.finished_episodes.asnumpy())


class ActStep(nn.Cell):
    """The policy acts in every environment once; returns the transitions, stores nothing.

    Outputs:
        Tuple of 5 tensors with leading dimension ``num_envs``: ``state`` (float32, 4),
        ``action`` (int32, 1), ``reward`` (float32, 1), ``next_state`` (float32, 4) and
        ``terminated`` (float32, 1), the columns of the replay buffer.
    """

    def __init__(self, policy: EpsilonGreedy, env: CartPole):
        super().__init__()
        self.policy = policy
        self.env = env
        self.tracker = EpisodeTracker(env.num_envs)

    def construct(self):
        state = self.env.state + 0.0
        action = self.policy(state)
        next_state, reward, terminated, truncated = self.env.step(action)
        _ = self.tracker(reward, ops.logical_or(terminated, truncated))
        return (state, action.expand_dims(1), reward.expand_dims(1), next_state,
                terminated.astype(ms.float32).expand_dims(1))


class CollectStep(nn.Cell):
    """:class:`ActStep` and ``insert`` of its transitions into the buffer: one graph.

    Outputs:
        The transitions inserted (see :class:`ActStep`).
    """

    def __init__(self, act: ActStep, buffer: ReplayBuffer):
        super().__init__()
        self.act = act
        self.buffer = buffer

    def construct(self):
        state, action, reward, next_state, terminated = self.act()
        _ = self.buffer.insert([state, action, reward, next_state, terminated])
        return state, action, reward, next_state, terminated


class ResetEnv(nn.Cell):
    """Reset a :class:`CartPole` as a compiled graph; returns the observations."""

    def __init__(self, env: CartPole):
        super().__init__()
        self.env = env

    def construct(self):
        return self.env.reset()


# --------------------------------------------------------------------------- learn
class DQNLoss(nn.Cell):
    """Mean Huber loss between ``Q(s, a)`` and the (Double) DQN target.

    Target: ``r + gamma * (1 - terminated) * Q_target(s', a')`` with ``a'`` the online
    network's argmax (Double DQN) or the target network's (DQN); no gradient flows into it.

    Inputs:
        - **state**, **action**, **reward**, **next_state**, **terminated** - a batch of
          transitions with leading dimension ``b``: float32 ``(b, 4)``, int32 ``(b, 1)``,
          float32 ``(b, 1)``, float32 ``(b, 4)``, float32 ``(b, 1)``.

    Outputs:
        Tensor, float32 scalar.
    """

    def __init__(self, q_net: nn.Cell, target_net: nn.Cell, gamma: float, double_dqn: bool = True,
                 huber_delta: float = 1.0):
        super().__init__()
        self.q_net = q_net
        self.target_net = target_net
        self.gamma = float(gamma)
        self.double_dqn = bool(double_dqn)
        self.huber_delta = float(huber_delta)

    def construct(self, state, action, reward, next_state, terminated):
        q_taken = ops.gather_elements(self.q_net(state), 1, action)
        next_target = self.target_net(next_state)
        if self.double_dqn:
            next_action = ops.argmax(self.q_net(next_state), dim=1, keepdim=True).astype(ms.int32)
        else:
            next_action = ops.argmax(next_target, dim=1, keepdim=True).astype(ms.int32)
        next_value = ops.gather_elements(next_target, 1, next_action)
        target = ops.stop_gradient(reward + self.gamma * (1.0 - terminated) * next_value)
        error = ops.abs(q_taken - target)
        quadratic = ops.minimum(error, self.huber_delta)
        return (0.5 * quadratic * quadratic + self.huber_delta * (error - quadratic)).mean()


class Update(nn.Cell):
    """One learn step from a given batch: loss, Adam update, periodic target sync.

    Every ``target_sync_period`` calls the online weights are copied into the target
    network (branch-free: ``where`` on every target parameter, cheap for this network).

    Inputs:
        The five batch columns of :class:`DQNLoss`.

    Outputs:
        Tensor, float32 scalar: the loss before the update.
    """

    def __init__(self, loss_net: DQNLoss, optimizer: nn.Optimizer, target_sync_period: int,
                 data_parallel_degree: int = 1):
        super().__init__()
        self.loss_net = loss_net
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        self.grad = ops.GradOperation(get_by_list=True)
        # Data-parallel learners (a ShardedReplayBuffer over msrun ranks) average their gradients.
        self.reduce = int(data_parallel_degree) > 1
        if self.reduce:
            self.reducer = nn.DistributedGradReducer(self.weights, mean=True, degree=int(data_parallel_degree))
        self.online = ParameterTuple(loss_net.q_net.get_parameters())
        self.target = ParameterTuple(loss_net.target_net.get_parameters())
        self.target_sync_period = int(target_sync_period)
        self.learn_steps = Parameter(Tensor(0, ms.int32), name="learn_steps", requires_grad=False)

    def construct(self, state, action, reward, next_state, terminated):
        loss = self.loss_net(state, action, reward, next_state, terminated)
        grads = self.grad(self.loss_net, self.weights)(state, action, reward, next_state, terminated)
        if self.reduce:
            grads = self.reducer(grads)
        loss = ops.depend(loss, self.optimizer(grads))
        steps = ops.depend(self.learn_steps + 1, loss)
        ops.assign(self.learn_steps, steps)
        sync = (steps % self.target_sync_period) == 0
        for online, target in zip(self.online, self.target):
            ops.assign(target, ops.where(sync, online, target))
        return loss


class LearnStep(nn.Cell):
    """``self.buffer.sample()`` and an :class:`Update` on the batch: one graph.

    Outputs:
        Tensor, float32 scalar: the loss.
    """

    def __init__(self, buffer: ReplayBuffer, update: Update):
        super().__init__()
        self.buffer = buffer
        self.update = update

    def construct(self):
        state, action, reward, next_state, terminated = self.buffer.sample()
        return self.update(state, action, reward, next_state, terminated)


class NumpyReplayBuffer:
    """A FIFO replay buffer in numpy with the ring layout of :mod:`mindspore_rl_buffer.ops`.

    The host-side baseline: :meth:`sample` draws uniformly with replacement on the host.

    Args:
        sample_size (int): Items per sample.
        capacity (int): Items held; the oldest are overwritten.
        shapes (Sequence[tuple[int]]): Item shape per column.
        types (Sequence): Dtype per column (MindSpore or numpy).
        seed (int): Seed of the sampling generator. Default: ``None``.
    """

    def __init__(self, sample_size: int, capacity: int, shapes: Sequence[Any], types: Sequence[Any],
                 seed: int | None = None):
        dtypes = [numpy_dtype(t) if isinstance(t, ms.dtype.Type) else np.dtype(t) for t in types]
        self.columns = [np.zeros((capacity, *shape), dtype) for shape, dtype in zip(shapes, dtypes)]
        self.sample_size = sample_size
        self.capacity = capacity
        self.head = 0
        self.count = 0
        self._rng = np.random.default_rng(seed)

    def insert(self, batch: Sequence[np.ndarray]) -> None:
        """Append a batch (leading dimension ``n`` on every column)."""
        self.head, self.count = ring_insert(self.columns, self.head, self.count, list(batch))

    def sample(self) -> tuple[np.ndarray, ...]:
        """Draw ``sample_size`` stored items uniformly with replacement."""
        if self.count == 0:
            raise ValueError("For 'sample', the buffer is empty: insert at least one item first.")
        rows = self._rng.integers(0, self.count, self.sample_size)
        return tuple(column[rows] for column in self.columns)

    def size(self) -> int:
        """Items stored."""
        return self.count


# --------------------------------------------------------------------------- evaluation
class EvalStep(nn.Cell):
    """One greedy step of a batch of MindSpore CartPoles, each playing one episode.

    ``returns`` accumulates each environment's reward until its first episode ends;
    ``alive`` marks those still playing. :meth:`restart` resets both and the environments.

    Outputs:
        Tuple of 2 tensors: environments still playing (int32 scalar) and the states reached
        (returned so that no output of the environment step is discarded).
    """

    def __init__(self, q_net: nn.Cell, env: CartPole):
        super().__init__()
        self.policy = GreedyAction(q_net)
        self.env = env
        n = env.num_envs
        self.returns = Parameter(Tensor(np.zeros(n, np.float32)), name="eval_returns", requires_grad=False)
        self.alive = Parameter(Tensor(np.ones(n, np.float32)), name="eval_alive", requires_grad=False)

    @jit
    def restart(self):
        """Reset the environments, the returns and the alive marks (compiled)."""
        ops.assign(self.returns, ops.zeros_like(self.returns))
        ops.assign(self.alive, ops.ones_like(self.alive))
        return self.env.reset()

    def construct(self):
        action = self.policy(self.env.state + 0.0)
        next_state, reward, terminated, truncated = self.env.step(action)
        ops.assign(self.returns, self.returns + self.alive * reward)
        alive = self.alive * (1.0 - ops.logical_or(terminated, truncated).astype(ms.float32))
        ops.assign(self.alive, alive)
        return (alive > 0).astype(ms.int32).sum().astype(ms.int32), next_state


def evaluate_mindspore(step: EvalStep, max_episode_steps: int) -> np.ndarray:
    """Play one greedy episode per environment of ``step``; return the episode returns."""
    step.restart()
    for t in range(max_episode_steps):
        alive, _ = step()
        if t % 50 == 49 and int(alive.asnumpy()) == 0:
            break
    return step.returns.asnumpy().copy()


def _gym_envs(num_envs: int, seed: int) -> list[Any]:
    try:
        import gymnasium
    except ImportError as error:
        raise ImportError("The gymnasium environment needs gymnasium: pip install gymnasium "
                          "(or pip install 'mindspore_rl_buffer[test]').") from error
    envs = [gymnasium.make("CartPole-v1") for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
        env.action_space.seed(seed + i)
    return envs


def evaluate_gymnasium(policy: GreedyAction, envs: list[Any]) -> np.ndarray:
    """Play one greedy episode in each gymnasium env (host loop); return the returns."""
    observations = np.stack([env.reset()[0] for env in envs]).astype(np.float32)
    returns = np.zeros(len(envs), np.float32)
    alive = np.ones(len(envs), bool)
    while alive.any():
        actions = policy(Tensor(observations)).asnumpy()
        for i, env in enumerate(envs):
            if not alive[i]:
                continue
            observation, reward, terminated, truncated, _ = env.step(int(actions[i]))
            observations[i] = observation
            returns[i] += reward
            alive[i] = not (terminated or truncated)
    return returns


# --------------------------------------------------------------------------- collectors
class _DeviceCollector:
    """MindSpore CartPole and the device buffer: one compiled graph per collect step."""

    def __init__(self, act: ActStep, buffer: ReplayBuffer):
        self.act = act
        self.step = CollectStep(act, buffer)
        ResetEnv(act.env)()

    def collect(self) -> None:
        self.step()

    def episodes(self) -> tuple[float, int]:
        return self.act.tracker.read()


class _DeviceEnvHostBufferCollector:
    """MindSpore CartPole feeding a numpy buffer: the transitions come back to the host."""

    def __init__(self, act: ActStep, buffer: NumpyReplayBuffer):
        self.act = act
        self.buffer = buffer
        ResetEnv(act.env)()

    def collect(self) -> None:
        self.buffer.insert([x.asnumpy() for x in self.act()])

    def episodes(self) -> tuple[float, int]:
        return self.act.tracker.read()


class _GymCollector:
    """gymnasium CartPole-v1 on the host; each step goes into the buffer by a direct call."""

    def __init__(self, policy: EpsilonGreedy, envs: list[Any], buffer: ReplayBuffer | NumpyReplayBuffer):
        self.policy = policy
        self.envs = envs
        self.buffer = buffer
        self.observations = np.stack([env.reset()[0] for env in envs]).astype(np.float32)
        self.running = np.zeros(len(envs), np.float64)
        self.finished_return = 0.0
        self.finished_episodes = 0

    def collect(self) -> None:
        actions = self.policy(Tensor(self.observations)).asnumpy()
        next_states = np.empty_like(self.observations)
        terminated = np.zeros((len(self.envs), 1), np.float32)
        rewards = np.zeros((len(self.envs), 1), np.float32)
        states = self.observations.copy()
        for i, env in enumerate(self.envs):
            observation, reward, term, trunc, _ = env.step(int(actions[i]))
            next_states[i], rewards[i, 0], terminated[i, 0] = observation, reward, float(term)
            self.running[i] += reward
            if term or trunc:
                self.finished_return += self.running[i]
                self.finished_episodes += 1
                self.running[i] = 0.0
                observation = env.reset()[0]
            self.observations[i] = observation
        actions = actions.astype(np.int32).reshape(-1, 1)
        self.buffer.insert([states, actions, rewards, next_states, terminated])

    def episodes(self) -> tuple[float, int]:
        return self.finished_return, self.finished_episodes


# --------------------------------------------------------------------------- trainer
@dataclass
class TrainResult:
    """What :func:`train` did: histories, the final evaluation and the files written."""

    solved: bool
    final_eval_return: float
    env_steps: int
    learn_steps: int
    wall_time: float
    steps_per_second: float
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    episode_history: list[tuple[int, float]] = field(default_factory=list)
    loss_history: list[tuple[int, float]] = field(default_factory=list)
    curve_path: Path | None = None
    checkpoint_path: Path | None = None


@dataclass
class DQNAgent:
    """The Cells and buffer of one DQN run, built by :func:`build_agent`."""

    q_net: QNetwork
    target_net: QNetwork
    policy: EpsilonGreedy
    update: Update
    buffer: ReplayBuffer | NumpyReplayBuffer
    learn: Any
    collector: Any
    evaluate: Any


def build_agent(config: dict[str, Any], buffer_kind: str = "device", env_kind: str = "mindspore",
                seed: int = 0) -> DQNAgent:
    """Build networks, buffer, collect and learn steps and the evaluator from ``config``.

    Args:
        config (dict): The ``algorithm_config`` (see ``configs/dqn.py``).
        buffer_kind (str): ``'device'`` (the ReplayBuffer, sampled inside the learn graph) or
            ``'numpy'`` (a host buffer sampled in Python). Default: ``'device'``.
        env_kind (str): ``'mindspore'`` (batched CartPole in the collect graph) or
            ``'gymnasium'`` (gymnasium CartPole-v1 on the host). Default: ``'mindspore'``.
        seed (int): Seeds MindSpore, the numpy buffer and the gymnasium environments.

    Raises:
        ValueError: If a kind is unknown or the config lacks an entry.
        ImportError: If ``env_kind='gymnasium'`` and gymnasium is not installed.
    """
    if buffer_kind not in ("device", "numpy"):
        raise ValueError(f"For 'train', 'buffer' must be 'device' or 'numpy', but got {buffer_kind!r}.")
    if env_kind not in ("mindspore", "gymnasium"):
        raise ValueError(f"For 'train', 'env' must be 'mindspore' or 'gymnasium', but got {env_kind!r}.")
    check_config(config)
    learner, policy_cfg = config["learner"], config["policy"]
    env_cfg, trainer = config["environment"], config["trainer"]
    buffer_cfg = config["replay_buffer"]
    num_envs = int(env_cfg["num_envs"])
    max_episode_steps = int(env_cfg.get("max_episode_steps", 500))
    gym_envs = _gym_envs(num_envs + int(trainer["eval_episodes"]), seed) if env_kind == "gymnasium" else None

    ms.set_seed(seed)
    hidden = tuple(policy_cfg.get("hidden_sizes", (128, 128)))
    q_net = QNetwork(OBSERVATION_SIZE, NUM_ACTIONS, hidden)
    target_net = QNetwork(OBSERVATION_SIZE, NUM_ACTIONS, hidden)
    copy_weights(q_net, target_net)
    for parameter in target_net.get_parameters():
        parameter.requires_grad = False
    optimizer = nn.Adam(q_net.trainable_params(), learning_rate=float(learner["learning_rate"]))
    loss_net = DQNLoss(q_net, target_net, learner["gamma"], learner.get("double_dqn", True),
                       learner.get("huber_delta", 1.0))
    # A ShardedReplayBuffer entry makes this a data-parallel learner on every msrun rank: the
    # same initial weights (same seed), averaged gradients, and each rank's own environments.
    buffer = create_buffer(buffer_cfg) if buffer_kind == "device" else None
    world_size, rank = getattr(buffer, "world_size", 1), getattr(buffer, "rank", 0)
    update = Update(loss_net, optimizer, learner["target_sync_period"], world_size)
    policy = EpsilonGreedy(q_net, policy_cfg["epsilon_start"], policy_cfg["epsilon_end"],
                           policy_cfg["epsilon_decay_steps"])

    if buffer is not None:
        learn_step = LearnStep(buffer, update)
        learn = learn_step
    else:
        buffer = NumpyReplayBuffer(buffer_cfg["sample_size"], buffer_cfg["capacity"],
                                   buffer_cfg["data_shape"], buffer_cfg["data_type"], seed=seed)

        def learn() -> Tensor:
            return update(*(Tensor(column) for column in buffer.sample()))

    if env_kind == "mindspore":
        act = ActStep(policy, CartPole(num_envs, max_episode_steps, seed=None if world_size == 1 else 1000 + rank))
        if buffer_kind == "device":
            collector: Any = _DeviceCollector(act, buffer)
        else:
            collector = _DeviceEnvHostBufferCollector(act, buffer)
        eval_step = EvalStep(q_net, CartPole(int(trainer["eval_episodes"]), max_episode_steps))

        def evaluate() -> np.ndarray:
            return evaluate_mindspore(eval_step, max_episode_steps)
    else:
        collector = _GymCollector(policy, gym_envs[:num_envs], buffer)
        greedy = GreedyAction(q_net)
        eval_envs = gym_envs[num_envs:]

        def evaluate() -> np.ndarray:
            return evaluate_gymnasium(greedy, eval_envs)

    return DQNAgent(q_net, target_net, policy, update, buffer, learn, collector, evaluate)


def _postfix(result: TrainResult, elapsed: float) -> dict[str, str]:
    """The progress bar's fields: last training return, loss, steps/s, last evaluation."""
    postfix = {"return": f"{result.episode_history[-1][1]:.1f}" if result.episode_history else "-",
               "loss": f"{result.loss_history[-1][1]:.4f}" if result.loss_history else "-",
               "steps/s": f"{result.env_steps / max(elapsed, 1e-9):.0f}"}
    if result.eval_history:
        postfix["eval"] = f"{result.eval_history[-1][1]:.1f}"
    return postfix


def _window_mean(values: list[Tensor]) -> float:
    return float(np.mean([v.asnumpy() for v in values])) if values else math.nan


def train(config: dict[str, Any], out_dir: str | Path | None = None, buffer_kind: str = "device",
          env_kind: str = "mindspore", max_steps: int | None = None, seed: int | None = None,
          progress: bool = True, stop_when_solved: bool = True) -> TrainResult:
    """Train DQN on CartPole until solved or out of steps; optionally write a curve and checkpoint.

    Each iteration collects one transition per environment and then runs
    ``learn_steps_per_collect`` learn steps (once ``learning_starts`` transitions are stored).
    Every ``eval_interval`` environment steps from ``eval_starts`` on (and at the end of the
    budget) the greedy policy plays ``eval_episodes`` episodes; training stops when their
    mean return reaches ``solve_threshold``.

    Args:
        config (dict): The ``algorithm_config``.
        out_dir (Union[str, Path]): Where to write ``learning_curve.png`` and
            ``dqn_cartpole.ckpt``; ``None`` writes nothing. Default: ``None``.
        buffer_kind (str): ``'device'`` or ``'numpy'``, see :func:`build_agent`.
        env_kind (str): ``'mindspore'`` or ``'gymnasium'``, see :func:`build_agent`.
        max_steps (int): Environment-step budget; ``None`` takes ``trainer.max_steps``.
        seed (int): ``None`` takes ``trainer.seed``.
        progress (bool): Show a tqdm progress bar. Default: ``True``.
        stop_when_solved (bool): Stop at the first evaluation that solves. Default: ``True``.

    Returns:
        TrainResult.
    """
    trainer = config["trainer"]
    seed = int(trainer.get("seed", 0) if seed is None else seed)
    max_steps = int(trainer["max_steps"] if max_steps is None else max_steps)
    agent = build_agent(config, buffer_kind, env_kind, seed)
    num_envs = int(config["environment"]["num_envs"])
    learning_starts = int(trainer["learning_starts"])
    learn_per_collect = int(trainer["learn_steps_per_collect"])
    eval_interval = int(trainer["eval_interval"])
    eval_starts = int(trainer.get("eval_starts", 0))
    log_interval = int(trainer.get("log_interval", 50))
    threshold = float(trainer.get("solve_threshold", 475.0))
    learning_starts = max(learning_starts, 1)

    from tqdm import tqdm

    result = TrainResult(False, math.nan, 0, 0, 0.0, 0.0)
    bar = tqdm(total=max_steps, unit="step", disable=not progress, dynamic_ncols=True)
    losses: list[Tensor] = []
    seen_return, seen_episodes = 0.0, 0
    last_eval = 0
    start = time.perf_counter()
    iteration = 0
    while result.env_steps < max_steps:
        agent.collector.collect()
        result.env_steps += num_envs
        iteration += 1
        if result.env_steps >= learning_starts:
            for _ in range(learn_per_collect):
                losses.append(agent.learn())
            result.learn_steps += learn_per_collect
        if iteration % log_interval == 0:
            total_return, episodes = agent.collector.episodes()
            if episodes > seen_episodes:
                mean_return = (total_return - seen_return) / (episodes - seen_episodes)
                result.episode_history.append((result.env_steps, mean_return))
                seen_return, seen_episodes = total_return, episodes
            if losses:
                result.loss_history.append((result.env_steps, _window_mean(losses)))
                losses = []
            bar.set_postfix(_postfix(result, time.perf_counter() - start), refresh=False)
            bar.update(result.env_steps - bar.n)
        due = result.env_steps >= eval_starts and result.env_steps - last_eval >= eval_interval
        if due or result.env_steps >= max_steps:
            last_eval = result.env_steps
            mean_eval = float(np.mean(agent.evaluate()))
            result.eval_history.append((result.env_steps, mean_eval))
            result.final_eval_return = mean_eval
            result.solved = mean_eval >= threshold
            bar.set_postfix(_postfix(result, time.perf_counter() - start), refresh=False)
            if result.solved and stop_when_solved:
                break
    if losses:
        result.loss_history.append((result.env_steps, _window_mean(losses)))
    bar.update(result.env_steps - bar.n)
    bar.close()
    result.wall_time = time.perf_counter() - start
    result.steps_per_second = result.env_steps / max(result.wall_time, 1e-9)
    if out_dir is not None:
        out = Path(out_dir)
        if getattr(agent.buffer, "world_size", 1) > 1:  # data-parallel: one output folder per rank
            out = out / f"rank{agent.buffer.rank}"
        out.mkdir(parents=True, exist_ok=True)
        result.checkpoint_path = out / "dqn_cartpole.ckpt"
        ms.save_checkpoint(agent.q_net, str(result.checkpoint_path))
        result.curve_path = out / "learning_curve.png"
        plot_learning_curve(result, result.curve_path, threshold)
    return result


def plot_learning_curve(result: TrainResult, path: str | Path, threshold: float = 475.0) -> None:
    """Write a PNG with training and evaluation returns and the loss against environment steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (returns_axis, loss_axis) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    if result.episode_history:
        steps, values = zip(*result.episode_history)
        returns_axis.plot(steps, values, label="training episodes (epsilon-greedy)", alpha=0.7)
    if result.eval_history:
        steps, values = zip(*result.eval_history)
        returns_axis.plot(steps, values, "o-", label="evaluation (greedy)")
    returns_axis.axhline(threshold, color="grey", linestyle="--", label=f"solved ({threshold:g})")
    returns_axis.set_ylabel("episode return")
    returns_axis.set_title("DQN on CartPole-v1")
    returns_axis.legend(loc="upper left")
    if result.loss_history:
        steps, values = zip(*result.loss_history)
        loss_axis.plot(steps, values)
        loss_axis.set_yscale("log")
    loss_axis.set_ylabel("TD loss (Huber)")
    loss_axis.set_xlabel("environment steps")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
