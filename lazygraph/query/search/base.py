"""What every search method shares: the plan a query runs under, the one interface a method
implements, and the query as ``QueryEngine.search`` hands it back.

A search finds what may answer a question, best first, without knowing the context limit, so one
search can be cut to several limits (the evaluation measures many); the answer call then reads what
fits. A method is one module of this package implementing ``Search``, registered in
``lazygraph.query.search.SEARCHES``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from lazygraph.llm.factory import LLMRoles
from lazygraph.query.answer import Answer, CitedSentence, nothing_found_answer
from lazygraph.query.cost import CostRecorder
from lazygraph.query.evidence import Claim, Evidence
from lazygraph.query.focus import SentenceFocus
from lazygraph.query.reader import ChunkRef, IndexReader
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import Settings

# What one method's search finds, in its own shape (ranked claims, scored chunks, ...).
Found = TypeVar("Found")


@dataclass(frozen=True)
class Plan:
    """How one query runs: method, preset, relevance-test budget, context limit and answer model."""

    method: str
    preset: str
    budget: int
    context_tokens: int
    synthesis_role: str


@dataclass
class Context:
    """What the answer call reads within the context limit, and the chunks it quotes, in order.

    The lazy search's context is ``evidence``: source chunks each with the claims drawn from it, then
    fill passages; ``claims`` lists those claims and fill passages for the query's record. The vector
    search's is ``chunks`` alone, read whole."""

    claims: list[Claim] = field(default_factory=list)
    chunks: list[ChunkRef] = field(default_factory=list)  # references of the engine's ``reader``
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.claims and not self.chunks and not self.evidence


@dataclass
class Reading:
    """How a search read the question, for the query's record: the text it searched with, its
    subqueries (text, concepts, budget share, tests and relevant chunk ids each) and its scope,
    "local" or "global"."""

    expanded_query: str
    subqueries: list[dict[str, Any]] = field(default_factory=list)
    scope: str = "local"


class Resources(Protocol):
    """What a search uses of the engine that runs it (``QueryEngine``), loaded once per engine."""

    settings: Settings
    reader: IndexReader  # what every method may read: a snapshot, or a serving store
    snapshot: IndexSnapshot  # the whole index in memory, for the methods the store does not serve

    @property
    def has_snapshot(self) -> bool:
        """Whether the index is read in memory (else from the serving store)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...

    def concept_vectors(self) -> np.ndarray | None: ...

    def focus(self) -> SentenceFocus: ...


class Search(ABC, Generic[Found]):
    """One retrieval method: search (up to the context cut), cut to a limit, answer from the cut."""

    # Whether the search itself calls the LLM. One that does not makes no relevance tests (its plan's
    # budget is 0) and loads no model unless its answer is wanted.
    calls_models: ClassVar[bool]
    # What it puts in the context, in a few words (reports name the method by it).
    selects: ClassVar[str]
    # Whether it reads only through ``IndexReader`` and so runs on the serving store too
    # (``query.index_source: store``); one that is not reads the snapshot.
    serves_from_store: ClassVar[bool] = False

    @classmethod
    def store_serves(cls, store: Any) -> bool:
        """Whether this opened serving store (``ServingStore``) holds what the method reads."""
        return cls.serves_from_store

    def __init__(self, engine: Resources) -> None:
        self.engine = engine
        self.reader = engine.reader
        self.qs = engine.settings.query

    @property
    def snapshot(self) -> IndexSnapshot:
        """The index in memory (``IndexSourceError`` on an engine opened on the serving store)."""
        return self.engine.snapshot

    @abstractmethod
    def retrieve(self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder) -> Found:
        """Everything that may answer ``question``, best first. ``roles`` is None only for a search
        that calls no model, run without an answer."""

    @abstractmethod
    def empty(self, question: str) -> Found:
        """What the search finds in an index without chunks (no model is loaded or called)."""

    @abstractmethod
    def context(self, found: Found, limit: int, recorder: CostRecorder) -> Context:
        """The best of ``found`` that fits in ``limit`` tokens of the answer prompt."""

    @abstractmethod
    def answer(
        self, question: str, found: Found, context: Context, roles: LLMRoles, recorder: CostRecorder
    ) -> Answer:
        """One answer call over a non-empty ``context``, each sentence citing its chunks."""

    @abstractmethod
    def render_context(self, found: Found, context: Context) -> str:
        """``context`` as the answer prompt quotes it (kept with evaluation rows, for audit)."""

    def reading(self, question: str, found: Found) -> Reading:
        """How this search read ``question``: by default as it was asked, with no subqueries."""
        return Reading(question)


@dataclass
class SearchOutcome(Generic[Found]):
    """A query after its search: its plan, the method that ran, what it found and its cost record."""

    question: str
    plan: Plan
    method: Search[Found]
    retrieval: Found
    recorder: CostRecorder
    roles: LLMRoles | None = None  # None: no model was loaded (an empty index, or no answer wanted)

    def context(self, limit: int) -> Context:
        return self.method.context(self.retrieval, limit, self.recorder)

    def rendered(self, context: Context) -> str:
        return "" if context.empty else self.method.render_context(self.retrieval, context)

    def answer(self, context: Context) -> Answer:
        """The answer from ``context``; with nothing in it, a reply saying so and no model call."""
        if context.empty:
            visited = sum(self.recorder.communities_visited.values())
            text = nothing_found_answer(self.recorder.relevance_tests, visited)
            return Answer([CitedSentence(text, [])])
        if self.roles is None:
            raise RuntimeError("this search ran without the answer model (answering=False)")
        return self.method.answer(self.question, self.retrieval, context, self.roles, self.recorder)
