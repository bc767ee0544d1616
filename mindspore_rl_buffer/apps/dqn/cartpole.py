"""CartPole-v1 written with MindSpore ops, batched over environments, compiled into graphs.

The dynamics are gymnasium's ``CartPole-v1`` (``gymnasium/envs/classic_control/cartpole.py``):
the same constants, explicit Euler integration with ``tau = 0.02``, termination when
``|x| > 2.4`` or ``|theta| > 12 degrees``, reward 1 on every step (including the one that
terminates), truncation after 500 steps (gymnasium's ``TimeLimit``), and reset states drawn
uniformly from ``[-0.05, 0.05]^4``. Two differences, both inherent to running on the device:
the state is float32 (gymnasium integrates in float64 and returns float32 observations), and
the random reset states come from MindSpore's generator, not numpy's. The equations'
constants are folded (:func:`accelerations`) for fewer kernels, so a step rounds differently
from gymnasium's order of operations; it agrees with gymnasium to float32 rounding.

:func:`cartpole_step` is the pure dynamics; :class:`CartPole` owns the batched state as
``Parameter`` objects and resets finished environments inside the graph, so a user's
``construct`` can call :meth:`CartPole.step` with no host round-trip. It resets them in one
of two ways, as gymnasium's vector environments do (``autoreset_mode``): in the same step
(the default, for the five-column replay buffer of ``configs/dqn.py``) or on the next step
(for a :class:`~mindspore_rl_buffer.TransitionReplayBuffer`, whose rows follow gymnasium's
next-step autoreset).
"""
from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn

from mindspore_rl_buffer.apps.dqn.draws import state, uniform
from mindspore_rl_buffer.apps.dqn.primitives import (
    ABS,
    ADDCMUL,
    ADDCMUL_ONE,
    ASSIGN,
    CAST,
    COS,
    EXPAND_DIMS,
    LOGICAL_AND,
    LOGICAL_NOT,
    LOGICAL_OR,
    ONES,
    REDUCE_ANY,
    SELECT,
    SIN,
    STACK_COLUMNS,
    UNSTACK_COLUMNS,
    ZEROS_LIKE,
)

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
LENGTH = 0.5  # half the pole's length
POLE_MASS_LENGTH = MASS_POLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
MAX_EPISODE_STEPS = 500
AUTORESET_MODES = ("same_step", "next_step")
RESET_BOUND = 0.05
OBSERVATION_SIZE = 4
NUM_ACTIONS = 2
_LIMITS = Tensor(np.array([X_THRESHOLD, np.inf, THETA_THRESHOLD, np.inf], np.float32))


# The accelerations' constants, folded: the push on the cart per unit of total mass, and the
# pole's terms divided by gravity, so that each term of ``accelerations`` is one ``addcmul``.
PUSH_PER_MASS = FORCE_MAG / TOTAL_MASS
_TEMP_GAIN = POLE_MASS_LENGTH / TOTAL_MASS
_ONE_OVER_G = 1.0 / GRAVITY
_DENOMINATOR = Tensor(np.float32(LENGTH * 4.0 / 3.0 / GRAVITY))
_DENOMINATOR_GAIN = LENGTH * MASS_POLE / (TOTAL_MASS * GRAVITY)
# ``Addcmul``'s factors as the float32 tensors ``ops.addcmul`` makes of them, made once: the primitive is one
# node of a graph, where each call of the wrapper is a function graph of its own to compile.
_GAINS = {name: Tensor(value, ms.float32) for name, value in
          (("temp", _TEMP_GAIN), ("denominator", -_DENOMINATOR_GAIN), ("theta", -_ONE_OVER_G), ("x", -_TEMP_GAIN))}
_TAU_ROW = Tensor(np.full(OBSERVATION_SIZE, TAU, np.float32))


def accelerations(theta, theta_dot, push):
    """CartPole-v1's cart and pole accelerations, elementwise (any shape, float32).

    gymnasium's equations with their constants folded (``temp`` over the total mass, the pole's
    equation divided by gravity) into 8 kernels, 4 of them ``addcmul``, where gymnasium's order
    of operations took 20: on a CPU each kernel costs a few microseconds whatever its size, and
    an evaluation plays 50,000 steps. The results agree with gymnasium's float64 steps to float32 rounding
    (``tests/apps/dqn/test_cartpole.py``).

    Args:
        theta, theta_dot (Tensor): pole angle and angular velocity.
        push (Tensor): the force on the cart over the total mass: ``PUSH_PER_MASS`` or
            ``-PUSH_PER_MASS``.

    Returns:
        Tuple of 2 tensors: the cart's and the pole's acceleration (:func:`cartpole_step` and
        the evaluation loop share them, so they round alike).

    Supported Platforms:
        ``GPU`` ``CPU``
    """
    sintheta = SIN(theta)
    costheta = COS(theta)
    # temp = (force + pole_mass_length * theta_dot**2 * sin) / total_mass
    temp = ADDCMUL(push, theta_dot * sintheta, theta_dot, _GAINS["temp"])
    # thetaacc = (g * sin - cos * temp) / (length * (4/3 - mass_pole * cos**2 / total_mass)), over g
    denominator = ADDCMUL(_DENOMINATOR, costheta, costheta, _GAINS["denominator"])
    thetaacc = ADDCMUL(sintheta, costheta, temp, _GAINS["theta"]) / denominator
    # xacc = temp - pole_mass_length * thetaacc * cos / total_mass
    xacc = ADDCMUL(temp, thetaacc, costheta, _GAINS["x"])
    return xacc, thetaacc


def cartpole_step(state, action):
    """One Euler step of CartPole-v1 for a batch of environments.

    Args:
        state (Tensor): float32, shape ``(n, 4)``: cart position, cart velocity, pole angle,
            pole angular velocity.
        action (Tensor): int, shape ``(n,)``: 0 pushes left, 1 pushes right.

    Returns:
        Tuple of 2 tensors: the next state (float32, ``(n, 4)``) and whether it is terminal
        (bool, ``(n,)``).

    Supported Platforms:
        ``GPU`` ``CPU``
    """
    # Written with few kernels (each costs a few microseconds on a CPU, whatever its size): the
    # Euler update and the termination test act on the whole (n, 4) state at once.
    _, x_dot, theta, theta_dot = UNSTACK_COLUMNS(state)
    push = CAST(SELECT(action == 1, PUSH_PER_MASS, -PUSH_PER_MASS), state.dtype)
    xacc, thetaacc = accelerations(theta, theta_dot, push)
    next_state = ADDCMUL(state, STACK_COLUMNS((x_dot, xacc, theta_dot, thetaacc)), _TAU_ROW, ADDCMUL_ONE)
    # |x| > 2.4 or |theta| > 12 degrees; the velocities never terminate.
    terminated = REDUCE_ANY(ABS(next_state) > _LIMITS, 1)
    return next_state, terminated


class CartPole(nn.Cell):
    """A batch of CartPole-v1 environments whose state lives on the device.

    Finished environments (terminated, or truncated after ``max_episode_steps``) are reset
    inside :meth:`step` to a random state in ``[-0.05, 0.05]^4``. With
    ``autoreset_mode='same_step'`` (the default) that happens in the step that ends the
    episode: :meth:`step` returns the state the step reached (for the replay buffer, as
    gymnasium's vector environments return ``final_obs``), and the ``state`` Parameter then
    holds where the next step starts from. With ``'next_step'`` (gymnasium's
    ``AutoresetMode.NEXT_STEP``) the step that ends an episode returns and keeps its final
    state; the next step of that environment ignores its action, resets, and returns the
    reset state with reward 0 and both flags false.

    Args:
        num_envs (int): Environments stepped together.
        max_episode_steps (int): Steps after which an episode is truncated. Default: ``500``.
        seed (int): Seed of the reset draws; ``None`` follows ``mindspore.set_seed``.
            Default: ``None``.
        autoreset_mode (str): ``'same_step'`` or ``'next_step'``, see above. Default: ``'same_step'``.

    Inputs of ``construct``/:meth:`step`:
        - **action** (Tensor) - int32, shape ``(num_envs,)``.
        - **unit** (Tensor) - float32, ``(num_envs, 4)``, uniform in ``[0, 1)``: the draws of
          this step's reset states (a caller drawing for several Cells at once gives them);
          ``None`` draws them from the environments' own generator state (``rng_key``,
          ``rng_counter``). Default: ``None``.

    Outputs:
        Tuple of 4 tensors: ``next_state`` (float32, ``(num_envs, 4)``: before a same-step
        reset; the reset state on a next-step reset), ``reward`` (float32, ``(num_envs,)``:
        ones, 0 on a next-step reset), ``terminated`` and ``truncated``
        (bool, ``(num_envs,)``). Use every output: MindSpore warns that it "eliminated side
        effect nodes by mistake" when a caller inside a graph discards one.

    Raises:
        ValueError: If ``num_envs`` is not an int >= 1 or ``autoreset_mode`` is unknown.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.cartpole import CartPole
        >>> env = CartPole(3)
        >>> obs = env.reset()
        >>> next_state, reward, terminated, truncated = env(ms.Tensor(np.ones(3, np.int32)))
        >>> next_state.shape, reward.asnumpy().tolist()
        ((3, 4), [1.0, 1.0, 1.0])
    """

    def __init__(self, num_envs: int, max_episode_steps: int = MAX_EPISODE_STEPS, seed: int | None = None,
                 autoreset_mode: str = "same_step"):
        super().__init__()
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"For 'CartPole', 'num_envs' must be an int >= 1, but got {num_envs!r}.")
        if autoreset_mode not in AUTORESET_MODES:
            raise ValueError(f"For 'CartPole', 'autoreset_mode' must be one of {list(AUTORESET_MODES)}, "
                             f"but got {autoreset_mode!r}.")
        self.num_envs = num_envs
        self.next_step_reset = autoreset_mode == "next_step"
        self.max_episode_steps = max_episode_steps
        self.rng_key, self.rng_counter = state("cartpole_rng", seed)
        self.state = Parameter(Tensor(np.zeros((num_envs, OBSERVATION_SIZE), np.float32)), name="state",
                               requires_grad=False)
        self.elapsed = Parameter(Tensor(np.zeros((num_envs,), np.int32)), name="elapsed", requires_grad=False)
        # 'next_step' only: the environments whose last step ended an episode (reset at their next step).
        self.ended = Parameter(Tensor(np.zeros((num_envs,), np.int32)), name="ended", requires_grad=False)

    def _initial_states(self, unit=None):
        if unit is None:
            unit = uniform((self.num_envs, OBSERVATION_SIZE), (self.rng_key, self.rng_counter))
        return (2.0 * RESET_BOUND) * unit - RESET_BOUND

    def reset(self):
        """Reset every environment; return the new observations, float32 ``(num_envs, 4)``."""
        state = self._initial_states()
        ASSIGN(self.state, state)
        ASSIGN(self.elapsed, ZEROS_LIKE(self.elapsed))
        ASSIGN(self.ended, ZEROS_LIKE(self.ended))
        return state

    def step(self, action, unit=None):
        """Step every environment by ``action``; see the class docstring for the inputs and outputs."""
        if self.next_step_reset:
            return self._step_then_reset(action, unit)
        next_state, terminated = cartpole_step(self.state, action)
        elapsed = self.elapsed + 1
        truncated = elapsed >= self.max_episode_steps
        done = LOGICAL_OR(terminated, truncated)
        observation = SELECT(EXPAND_DIMS(done, 1), self._initial_states(unit), next_state)
        ASSIGN(self.state, observation)
        ASSIGN(self.elapsed, SELECT(done, ZEROS_LIKE(elapsed), elapsed))
        reward = ONES((self.num_envs,), ms.float32)
        return next_state, reward, terminated, truncated

    def _step_then_reset(self, action, unit):
        """The ``'next_step'`` step: the environments that ended last step reset, the others step."""
        resetting = self.ended > 0
        stepped, fell = cartpole_step(self.state, action)
        elapsed = SELECT(resetting, ZEROS_LIKE(self.elapsed), self.elapsed + 1)
        playing = LOGICAL_NOT(resetting)
        terminated = LOGICAL_AND(fell, playing)
        truncated = LOGICAL_AND(elapsed >= self.max_episode_steps, playing)
        observation = SELECT(EXPAND_DIMS(resetting, 1), self._initial_states(unit), stepped)
        ASSIGN(self.state, observation)
        ASSIGN(self.elapsed, elapsed)
        ASSIGN(self.ended, CAST(LOGICAL_OR(terminated, truncated), ms.int32))
        reward = CAST(SELECT(resetting, 0.0, 1.0), ms.float32)
        return observation, reward, terminated, truncated

    def construct(self, action, unit=None):
        return self.step(action, unit)
