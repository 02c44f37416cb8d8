"""The reduce context of a lazy search: every claim shown beside the source sentences it came from.

A claim is the map step's one-sentence reading of a passage, and a small model's reading can
paraphrase, shorten a list, drop the attribute asked for or lose a negation ("the review did not
recommend refusal" became "recommended refusal"). So the answer model never reads a claim alone:
each source chunk appears once, as the focused passage the map step read (its title and sentences,
quoted), followed by the claims drawn from it, and the answer cites that chunk. Chunks come in the
order of their best-ranked claim; a chunk the model drew no claim from (its sentence was quoted for
it) shows its passage alone.

What the claims leave of the context limit goes to fill passages
(``lazygraph.query.search.lazy.fill``), as items of the same shape without claims. ``Claim`` and
``Evidence`` are the context's items, read by the query's record and the evaluation as well.

For a global question (``Refinement.scope``) the items are grouped by theme: the level-1 community
of their chunk (level 0 where the hierarchy has one level), so the answer can be organised by theme,
each theme drawn from its own communities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lazygraph.query.snapshot import IndexSnapshot


@dataclass
class Claim:
    """A statement drawn from source chunks (the map step's), or a passage standing in the context."""

    text: str
    chunks: list[int]
    subquery: int
    community: int
    extracted: bool = False
    score: float = 0.0
    tokens: int = 0
    # "claim": from the map step (or quoted for a chunk the model gave no claim); "passage": a focused
    # passage filling the context the claims left free (lazygraph.query.search.lazy.fill)
    kind: str = "claim"


# What separates the claims from the sentences they came from, inside one item.
CLAIMS_LABEL = "Claims drawn from it:"


@dataclass
class Evidence:
    """One source chunk in the reduce context: its focused passage, and the claims drawn from it."""

    chunk: int
    passage: str
    claims: list[Claim] = field(default_factory=list)
    community: int = -1
    # "claim": a chunk the search judged relevant (with the claims drawn from it, if any); "passage": a
    # fill passage (no claims)
    kind: str = "claim"
    score: float = 0.0
    tokens: int = 0
    theme: int = -1  # the community that groups it in a global answer (-1: none)

    @property
    def text(self) -> str:
        """What the answer model reads of it: the quoted sentences, then the claims."""
        if not self.claims:
            return self.passage
        claims = " ".join(_sentence(c.text) for c in self.claims)
        return f"{self.passage}\n{CLAIMS_LABEL} {claims}"

    @property
    def chunks(self) -> list[int]:
        """The chunks an answer sentence citing this item cites."""
        return [self.chunk]


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def gather_evidence(
    ranked: Sequence[Claim], passages: dict[int, str], render: Callable[[list[int]], list[str]]
) -> list[Evidence]:
    """The ranked claims as items, one per source chunk, in the order of each chunk's best claim.

    ``passages`` holds what the map step read of each chunk; ``render`` gives the focused passage of
    chunks it does not hold. A claim citing several chunks stands under the first; a quoted sentence
    standing in for a chunk without claims (``Claim.extracted``) adds nothing to the chunk's passage.
    """
    items: dict[int, Evidence] = {}
    for claim in ranked:
        if not claim.chunks:
            continue
        chunk = claim.chunks[0]
        item = items.get(chunk)
        if item is None:
            item = items[chunk] = Evidence(
                chunk, passages.get(chunk, ""), [], claim.community, score=claim.score
            )
        if not claim.extracted:
            item.claims.append(claim)
    missing = [c for c, item in items.items() if not item.passage]
    for chunk, passage in zip(missing, render(missing) if missing else [], strict=True):
        items[chunk].passage = passage
    return list(items.values())


def fit_evidence(
    items: Sequence[Evidence],
    limit: int,
    count_tokens: Callable[[str], int],
    render: Callable[[int, Evidence], str],
) -> list[Evidence]:
    """The items, in order, that fit in ``limit`` tokens as the answer prompt renders them; an item too
    long for what is left keeps its passage and as many of its claims as fit, or is skipped."""
    kept: list[Evidence] = []
    used = 0
    for item in items:
        trimmed = Evidence(item.chunk, item.passage, list(item.claims), item.community, item.kind, item.score)
        while True:
            trimmed.tokens = count_tokens(render(len(kept) + 1, trimmed))
            if used + trimmed.tokens <= limit or not trimmed.claims:
                break
            trimmed.claims.pop()
        if used + trimmed.tokens <= limit:
            kept.append(trimmed)
            used += trimmed.tokens
    return kept


def theme_of(snapshot: IndexSnapshot, chunk: int) -> int:
    """The chunk's level-1 community (level 0 in a one-level hierarchy; -1 without communities)."""
    primary = snapshot.chunk_primary_community
    if primary.size == 0 or snapshot.n_levels == 0:
        return -1
    level = min(1, snapshot.n_levels - 1)
    community = int(primary[level, chunk])
    return community if community >= 0 else int(primary[0, chunk])


def group_by_theme(items: Sequence[Evidence], snapshot: IndexSnapshot) -> list[Evidence]:
    """The items with their themes set, each theme's items together, themes in order of their best item."""
    order: dict[int, list[Evidence]] = {}
    for item in items:
        item.theme = theme_of(snapshot, item.chunk)
        order.setdefault(item.theme, []).append(item)
    return [item for group in order.values() for item in group]


def theme_topics(snapshot: IndexSnapshot, theme: int, limit: int = 4) -> list[str]:
    """The top concepts of a theme's community, to label its group in the answer prompt."""
    if theme < 0 or theme >= len(snapshot.community_top_concepts):
        return []
    return [str(t) for t in snapshot.community_top_concepts[theme][:limit]]
