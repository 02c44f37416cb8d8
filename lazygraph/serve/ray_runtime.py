"""Starting a local Ray or joining a cluster, once per process."""

from __future__ import annotations

import os

from lazygraph.errors import ConfigError, SetupError
from lazygraph.settings import Settings

# The local object store only carries questions and answers; a small one leaves memory to the
# index snapshots and the LLM.
_LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024


def ensure_ray(settings: Settings) -> bool:
    """Connect this process to Ray; returns True when it started a local Ray (the caller shuts it down)."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is a hard dependency
        raise SetupError("query serving needs the ray package; run cluster/bootstrap.sh") from exc
    if ray.is_initialized():
        return False
    if settings.ray.address:
        try:
            ray.init(address=settings.ray.address, log_to_driver=False)
        except ConnectionError as exc:
            raise ConfigError(
                f"cannot reach the Ray cluster at ray.address={settings.ray.address!r}: {exc}. "
                f"{_connection_hint(exc)}"
            ) from exc
        return False
    ray.init(
        num_cpus=os.cpu_count() or 1,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=_LOCAL_OBJECT_STORE_BYTES,
    )
    return True


def _connection_hint(exc: BaseException) -> str:
    """What to do: a cluster that refused our token differs from one that is not there."""
    chain = " ".join(str(e) for e in (exc, exc.__cause__, exc.__context__) if e is not None)
    if "InvalidAuthToken" in chain or "AuthenticationError" in chain:
        return (
            "The cluster uses token authentication: set RAY_AUTH_MODE=token and give this process the "
            "cluster's token (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN), or submit the "
            "batch with `ray job submit` (see jobs/README.md)."
        )
    return "Start it (`ray start --head`, see cluster/ray/) or unset ray.address for a local Ray."
