"""Diffusion machinery shared by the generative models: a DDPM noise schedule and rectified flow.

Both are small modules of buffers (so ``.to(device)`` moves them) that know
how to noise clean data for training and how to integrate back from noise
with a caller's network; the network itself, guidance and conditioning stay
with the caller, as a function of ``(x_t, t)``.

- :class:`DDPMSchedule`: Ho et al.'s discrete-time schedule (``linear`` or
  ``cosine`` betas), the epsilon-prediction objective, and sampling with
  DDIM's update (``eta=1`` on every timestep is DDPM's ancestral sampler,
  ``eta=0`` the deterministic DDIM sampler, on any subset of the steps).
- :class:`RectifiedFlow`: ``x_t = (1 - t) x0 + t x1`` from noise ``x0`` at
  ``t = 0`` to data ``x1`` at ``t = 1``, the velocity ``x1 - x0`` as target,
  and Euler or Heun integration of the learned velocity field.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["DDPMSchedule", "RectifiedFlow"]


def _expand(values, like):
    return values.reshape(-1, *([1] * (like.dim() - 1))).to(like.dtype)


class DDPMSchedule(nn.Module):
    """A discrete DDPM noise schedule with epsilon prediction.

    Parameters
    ----------
    n_timesteps : int, default=1000
    beta_schedule : {"linear", "cosine"}, default="linear"
        ``"linear"``: betas evenly spaced from ``beta_start`` to
        ``beta_end``; ``"cosine"``: Nichol and Dhariwal's
        ``alpha_bar(t) = cos((t / T + s) / (1 + s) * pi / 2) ** 2``, betas
        clipped at 0.999.
    beta_start, beta_end : float, default=1e-4, 0.02

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import DDPMSchedule
    >>> schedule = DDPMSchedule(n_timesteps=50)
    >>> x0 = torch.zeros(2, 3)
    >>> t = torch.tensor([0, 49])
    >>> x_t = schedule.add_noise(x0, torch.ones(2, 3), t)
    >>> samples = schedule.sample(lambda x, t: torch.zeros_like(x), (4, 3), generator=torch.Generator().manual_seed(0))
    >>> tuple(samples.shape)
    (4, 3)
    """

    def __init__(self, n_timesteps=1000, beta_schedule="linear", beta_start=1e-4, beta_end=0.02):
        super().__init__()
        if int(n_timesteps) != n_timesteps or n_timesteps < 1:
            raise ValueError(f"n_timesteps={n_timesteps!r}; expected a whole number >= 1.")
        if beta_schedule == "linear":
            if not 0 < beta_start <= beta_end < 1:
                raise ValueError(f"betas from {beta_start} to {beta_end}; expected 0 < beta_start <= beta_end < 1.")
            betas = torch.linspace(beta_start, beta_end, n_timesteps, dtype=torch.float64)
        elif beta_schedule == "cosine":
            steps = torch.arange(n_timesteps + 1, dtype=torch.float64) / n_timesteps
            alpha_bar = torch.cos((steps + 0.008) / 1.008 * math.pi / 2) ** 2
            betas = (1 - alpha_bar[1:] / alpha_bar[:-1]).clamp(max=0.999)
        else:
            raise ValueError(f"beta_schedule={beta_schedule!r}; expected 'linear' or 'cosine'.")
        self.n_timesteps = int(n_timesteps)
        self.beta_schedule = beta_schedule
        alphas_cumprod = torch.cumprod(1 - betas, dim=0)
        self.register_buffer("betas", betas.float())
        self.register_buffer("alphas_cumprod", alphas_cumprod.float())

    def add_noise(self, x0, noise, t):
        """``x_t = sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) noise`` for integer timesteps ``t`` (B,)."""
        alpha_bar = _expand(self.alphas_cumprod[t], x0)
        return alpha_bar.sqrt() * x0 + (1 - alpha_bar).sqrt() * noise

    def training_pair(self, x0, generator=None):
        """Random timesteps, the noised batch and the target: ``(t, x_t, noise)``."""
        t = torch.randint(0, self.n_timesteps, (len(x0),), generator=generator, device=x0.device)
        noise = torch.randn(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype)
        return t, self.add_noise(x0, noise, t), noise

    def predict_x0(self, x_t, eps, t):
        """The clean estimate implied by a noise prediction."""
        alpha_bar = _expand(self.alphas_cumprod[t], x_t)
        return (x_t - (1 - alpha_bar).sqrt() * eps) / alpha_bar.sqrt()

    def timesteps(self, n_steps=None):
        """The descending timesteps of a sampler of ``n_steps`` (all of them by default), evenly spaced."""
        n_steps = self.n_timesteps if n_steps is None else int(n_steps)
        if not 1 <= n_steps <= self.n_timesteps:
            raise ValueError(f"n_steps={n_steps}; expected 1 to n_timesteps={self.n_timesteps}.")
        return torch.linspace(self.n_timesteps - 1, 0, n_steps).round().long().unique_consecutive()

    @torch.no_grad()
    def sample(self, eps_fn, shape, *, n_steps=None, eta=1.0, clip=None, generator=None, device=None,
               dtype=torch.float32):
        """Integrate from Gaussian noise with ``eps_fn(x_t, t)``, the network's noise prediction.

        Parameters
        ----------
        eps_fn : callable
            ``eps_fn(x_t, t)`` with ``t`` an int64 tensor ``(B,)``.
        shape : tuple
        n_steps : int or None, default=None
            Timesteps visited (all by default).
        eta : float, default=1.0
            DDIM's noise scale: 1 is the DDPM posterior (ancestral sampling
            when every timestep is visited), 0 deterministic DDIM.
        clip : float or None, default=None
            Clamp the clean estimate to ``[-clip, clip]`` every step (data
            scaled to [-1, 1] use 1).
        generator : torch.Generator or None
        device, dtype
            Of the samples.

        Returns
        -------
        torch.Tensor of ``shape``
        """
        device = self.betas.device if device is None else device
        x = torch.randn(shape, generator=generator, device=device, dtype=dtype)
        steps = self.timesteps(n_steps).tolist()
        for i, step in enumerate(steps):
            t = torch.full((shape[0],), step, dtype=torch.int64, device=device)
            eps = eps_fn(x, t)
            x0 = self.predict_x0(x, eps, t)
            if clip is not None:
                x0 = x0.clamp(-clip, clip)
                eps = (x - self.alphas_cumprod[step].sqrt() * x0) / (1 - self.alphas_cumprod[step]).sqrt()
            alpha_bar = self.alphas_cumprod[step]
            previous = self.alphas_cumprod[steps[i + 1]] if i + 1 < len(steps) else torch.ones_like(alpha_bar)
            sigma = eta * ((1 - previous) / (1 - alpha_bar) * (1 - alpha_bar / previous)).clamp(min=0).sqrt()
            direction = (1 - previous - sigma ** 2).clamp(min=0).sqrt()
            x = previous.sqrt() * x0 + direction * eps
            if i + 1 < len(steps) and eta > 0:
                x = x + sigma * torch.randn(shape, generator=generator, device=device, dtype=dtype)
        return x


class RectifiedFlow(nn.Module):
    """Rectified flow (flow matching on straight paths): noise at ``t = 0``, data at ``t = 1``.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import RectifiedFlow
    >>> flow = RectifiedFlow()
    >>> x1 = torch.full((3, 2), 5.0)
    >>> # The exact velocity towards x1 carries any noise onto it.
    >>> out = flow.sample(lambda x, t: (x1 - x) / (1 - t[:, None]).clamp(min=1e-3), (3, 2), n_steps=10,
    ...                   generator=torch.Generator().manual_seed(0))
    >>> bool(torch.allclose(out, x1))
    True
    """

    def interpolate(self, x0, x1, t):
        """``(1 - t) x0 + t x1`` with ``t`` of shape (B,) in [0, 1]."""
        t = _expand(t, x0)
        return (1 - t) * x0 + t * x1

    def training_pair(self, x1, generator=None):
        """Uniform times, the interpolated batch and the velocity target: ``(t, x_t, x1 - x0)``."""
        t = torch.rand(len(x1), generator=generator, device=x1.device, dtype=x1.dtype)
        x0 = torch.randn(x1.shape, generator=generator, device=x1.device, dtype=x1.dtype)
        return t, self.interpolate(x0, x1, t), x1 - x0

    @torch.no_grad()
    def sample(self, velocity_fn, shape, *, n_steps=20, sampler="euler", generator=None, device=None,
               dtype=torch.float32, noise=None):
        """Integrate ``dx/dt = velocity_fn(x, t)`` from noise at 0 to 1 in ``n_steps`` equal steps.

        ``sampler="heun"`` adds Heun's corrector (two evaluations a step, but
        the last); ``"euler"`` is the plain Euler method. ``noise``, a tensor
        of ``shape``, is the starting point instead of a fresh draw (a caller
        that shares one draw over a batch, so that a sample does not depend
        on its batch).
        """
        if sampler not in ("euler", "heun"):
            raise ValueError(f"sampler={sampler!r}; expected 'euler' or 'heun'.")
        if int(n_steps) != n_steps or n_steps < 1:
            raise ValueError(f"n_steps={n_steps!r}; expected a whole number >= 1.")
        if noise is not None:
            if tuple(noise.shape) != tuple(shape):
                raise ValueError(f"noise has shape {tuple(noise.shape)}, expected {tuple(shape)}.")
            x = noise.to(device=noise.device if device is None else device, dtype=dtype)
        else:
            x = torch.randn(shape, generator=generator, device=device, dtype=dtype)
        times = torch.linspace(0, 1, int(n_steps) + 1, device=x.device, dtype=dtype)
        for start, end in zip(times[:-1], times[1:]):
            t = start.expand(shape[0])
            velocity = velocity_fn(x, t)
            if sampler == "heun" and end < 1:
                predicted = x + (end - start) * velocity
                velocity = 0.5 * (velocity + velocity_fn(predicted, end.expand(shape[0])))
            x = x + (end - start) * velocity
        return x
