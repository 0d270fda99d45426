"""What a node's warm-up (``warmup_seconds``: the time its ``open()`` takes to load a model)
changes in its pods and its autoscaling.

- The startup probe (``/readyz`` every 2 s) allows twice the warm-up, and never less than
  the 120 s every worker gets: a load on a cold node (an empty page cache, weights read
  over the network) is slower than the one measured. Kubernetes runs no readiness or
  liveness probe until the startup probe has passed, so those keep their timing.
- KEDA's HorizontalPodAutoscaler is paced by the warm-up. A scale-up needs the input lag
  to have asked for more replicas for a whole warm-up (``scaleUp.stabilizationWindowSeconds``:
  a burst shorter than that is over before a new replica could serve it), and adds at most
  as many replicas as there are in any one warm-up (``Percent 100`` per ``periodSeconds``
  of the warm-up): the lag does not fall while the new replicas load, so without a pace
  the autoscaler would keep adding replicas for it.
- A replica is not released sooner than a warm-up after the lag last asked for it
  (``scaleDown.stabilizationWindowSeconds`` and KEDA's ``cooldownPeriod``, each at least
  its default): keeping an idle replica that long costs what loading a new one does, the
  break-even rule for an idle resource.
"""

from __future__ import annotations

from vf.ir.plan import ScaleBehavior

STARTUP_PERIOD_SECONDS = 2
STARTUP_FAILURES = 60  # 120 s: what every long-running worker gets to start
SCALE_UP_PERCENT = 100
HPA_SCALE_DOWN_WINDOW = 300  # Kubernetes' default scaleDown.stabilizationWindowSeconds


def startup_failures(warmup: int | None) -> int:
    """The startup probe's ``failureThreshold`` at one probe every 2 s: twice the warm-up
    (``2 x warmup / 2 = warmup`` failures), at least 60 (120 s)."""
    if warmup is None:
        return STARTUP_FAILURES
    return max(STARTUP_FAILURES, -(-2 * warmup // STARTUP_PERIOD_SECONDS))


def scale_behavior(warmup: int | None) -> ScaleBehavior | None:
    """The HorizontalPodAutoscaler behaviour of a scaled node that warms up; None when it
    starts at once (KEDA's and Kubernetes' defaults hold)."""
    if warmup is None:
        return None
    return ScaleBehavior(
        warmup_seconds=warmup,
        scale_up_window=warmup,
        scale_up_percent=SCALE_UP_PERCENT,
        scale_up_period=warmup,
        scale_down_window=max(HPA_SCALE_DOWN_WINDOW, warmup),
    )


def cooldown(declared: int, warmup: int | None) -> int:
    """KEDA's ``cooldownPeriod`` (before scaling to zero): at least one warm-up."""
    return declared if warmup is None else max(declared, warmup)
