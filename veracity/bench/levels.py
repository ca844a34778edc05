"""`bench throughput`'s levels: how many claims each concurrency level verifies, and its folder."""

from __future__ import annotations

from veracity.errors import ConfigError

def default_claims_per_level(concurrency: int) -> int:
    """Enough claims to keep every worker busy twice over."""
    return max(8, 2 * concurrency)


def level_dir_name(concurrency: int) -> str:
    return f"c{concurrency:04d}"


def plan_level_sizes(levels: list[int], available: int,
                     claims_per_level: int | None) -> tuple[list[int], bool]:
    """Claims per level, and whether they were cut down to fit ``available`` disjoint claims.

    An explicit ``claims_per_level`` that does not fit is an error; the defaults (max(8, 2 x concurrency))
    shrink in proportion, at least one claim per level.
    """
    if not levels:
        raise ConfigError("no concurrency levels given", hint="e.g. --concurrency 1,4,16,64")
    if len(set(levels)) != len(levels):
        raise ConfigError(f"concurrency levels repeat: {','.join(map(str, levels))}",
                          hint="list each level once, e.g. --concurrency 1,4,16")
    if claims_per_level is not None:
        if claims_per_level < 1:
            raise ConfigError(f"--claims-per-level must be at least 1, got {claims_per_level}",
                              hint="e.g. --claims-per-level 16")
        sizes = [claims_per_level] * len(levels)
        if sum(sizes) > available:
            raise ConfigError(
                f"{len(levels)} levels x {claims_per_level} claims need {sum(sizes)} distinct claims, "
                f"the dataset has {available}",
                hint="lower --claims-per-level or give fewer --concurrency levels "
                     "(levels never reuse a claim)")
        return sizes, False
    sizes = [default_claims_per_level(c) for c in levels]
    if sum(sizes) <= available:
        return sizes, False
    if available < len(levels):
        raise ConfigError(f"the dataset has {available} claims, fewer than the {len(levels)} levels",
                          hint="give fewer --concurrency levels or a larger dataset")
    scale = available / sum(sizes)
    return [max(1, int(s * scale)) for s in sizes], True
