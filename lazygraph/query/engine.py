"""The query engine: the path of every query, and the resources its searches share.

plan (method, budget, context limit) -> search (a method of ``lazygraph.query.search``, up to the
context cut) -> the cut to the answer model's window -> one answer call -> the result with its cost.
One engine holds one index reader (the snapshot in memory, or the serving store, as
``query.index_source`` and ``lazygraph.query.source`` choose), the encoder, the LLM clients (built on
first use, per synthesis role), the sentence focus and the tokenizer, and answers any number of
queries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache, partial
from typing import Any, Protocol

import numpy as np
from rich.console import Console

from lazygraph.errors import ConfigError, IndexSourceError
from lazygraph.llm.cache import LLMCache
from lazygraph.llm.factory import LLMRoles, make_roles
from lazygraph.llm.resilience import query_deadline
from lazygraph.query.cost import CostRecorder
from lazygraph.query.focus import SentenceFocus
from lazygraph.query.question import PROMPT_OVERHEAD_TOKENS, validate_question
from lazygraph.query.reader import IndexReader
from lazygraph.query.result import QueryResult, shape_result
from lazygraph.query.search import SEARCHES, Context, Plan, Retrieval, SearchOutcome, require_source
from lazygraph.query.snapshot import IndexSnapshot, load_snapshot
from lazygraph.query.source import Source, resolve_index_source
from lazygraph.query.store_reader import StoreReader
from lazygraph.settings import Settings

# Names other modules import from here.
__all__ = [
    "PROMPT_OVERHEAD_TOKENS",
    "Encoder",
    "Plan",
    "QueryEngine",
    "QueryResult",
    "Retrieval",
    "check_index_source",
    "choose_index_source",
    "plan_query",
]


# What the engine may be given for its LLM clients: one fixed set of roles, or a builder of the roles
# for a preset's synthesis role (Ray query actors pass one whose clients forward to the LLM actor).
RolesSource = LLMRoles | Callable[[str], LLMRoles]


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import tiktoken

    return tiktoken.get_encoding(name)


class QueryEngine:
    def __init__(
        self,
        settings: Settings,
        reader: IndexReader,
        console: Console | None = None,
        *,
        roles: RolesSource | None = None,
        embedder: Encoder | None = None,
    ) -> None:
        self.settings = settings
        self.reader = reader
        self.console = console or Console(stderr=True)
        self._injected_roles = roles
        self._roles: dict[str, LLMRoles] = {}
        self._embedder = embedder
        self._focus: SentenceFocus | None = None
        self._llm_cache: LLMCache | None = None
        # Guards the models, clients and caches made on first use: a query actor may answer several
        # queries at once in threads sharing this engine (``ray.queries_per_actor``).
        self._setup_lock = threading.RLock()

    @classmethod
    def open(
        cls,
        settings: Settings,
        index: str,
        console: Console | None = None,
        *,
        roles: RolesSource | None = None,
        embedder: Encoder | None = None,
        snapshot: IndexSnapshot | None = None,
        method: str = "lazy",
        preset: str | None = None,
    ) -> QueryEngine:
        """Open the index as ``query.index_source`` says (``auto``: for queries of ``method`` and
        ``preset``, ``choose_index_source``): load (or reuse) its snapshot, unless one is given (a batch
        actor's shared one), or open its serving store, loading nothing index-sized. The embedding
        model and the tokenizer are loaded now, the LLM on the first query needing it."""
        console = console or Console(stderr=True)
        reader: IndexReader
        if snapshot is not None:
            reader = snapshot
        elif choose_index_source(settings, index, method, preset, console) == "store":
            with console.status(f"opening the serving store of {index}"):
                reader = StoreReader.open(index, settings)
        else:
            with console.status(f"loading index {index}"):
                reader = load_snapshot(index, settings)
        engine = cls(settings, reader, console, roles=roles, embedder=embedder)
        if reader.n_chunks:
            with console.status("loading the embedding model and concept vectors"):
                engine.encode([])  # loads the model now rather than inside the first query
                engine.count_tokens("")  # and the tokenizer's tables
                if engine.has_snapshot:  # concept vectors serve the lazy search, which needs the snapshot
                    engine.concept_vectors()
        return engine

    @property
    def has_snapshot(self) -> bool:
        """Whether the engine reads the index in memory (every method) rather than the serving store."""
        return not isinstance(self.reader, StoreReader)

    @property
    def index_source(self) -> Source:
        """What this engine reads the index from, as query results report it."""
        return "snapshot" if self.has_snapshot else "store"

    @property
    def snapshot(self) -> IndexSnapshot:
        """The index in memory, which the lazy method reads (and the others where it is loaded)."""
        if not self.has_snapshot:
            raise IndexSourceError(
                "this engine reads the serving store, not the whole index in memory; set "
                "`query.index_source: snapshot` to load the index in memory"
            )
        return self.reader  # type: ignore[return-value]

    # ---- resources --------------------------------------------------------------------------------
    def roles(self, synthesis_role: str) -> LLMRoles:
        """The clients for a preset's synthesis role: the roles passed in (fixed, or built per synthesis
        role by the callable passed in), else built from the settings, once per synthesis role."""
        if isinstance(self._injected_roles, LLMRoles):
            return self._injected_roles
        with self._setup_lock:
            if synthesis_role not in self._roles:
                build = self._injected_roles or partial(make_roles, self.settings)
                with self.console.status("loading the language model"):
                    roles = build(synthesis_role)
                cache = self.llm_cache()
                for client in (roles.relevance, roles.synthesis):
                    # A client that cannot name its model would share keys with every other model.
                    if cache is not None and client.cache is None and client.model_id:
                        client.cache = cache
                self._roles[synthesis_role] = roles
            return self._roles[synthesis_role]

    def llm_cache(self) -> LLMCache | None:
        """The verdict and completion cache of the clients this engine builds (None when turned off)."""
        cfg = self.settings.query.llm_cache
        if not cfg.enabled:
            return None
        with self._setup_lock:
            if self._llm_cache is None:
                location = cfg.location or f"{self.reader.uri}/llm_cache"
                # Reads nothing yet: entries are read by key, through an LRU of local_entries.
                self._llm_cache = LLMCache.open(location, self.settings.storage, cfg.local_entries)
            return self._llm_cache

    def flush_llm_cache(self) -> None:
        """Persist the cache entries made since the last flush (the engine does so after every query)."""
        if self._llm_cache is not None:
            self._llm_cache.flush()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            from lazygraph.embed import get_embedder

            with self._setup_lock:
                if self._embedder is None:
                    self._embedder = get_embedder(self.settings.embedding)
        return np.asarray(self._embedder.encode(list(texts)), dtype=np.float32)

    def concept_vectors(self) -> np.ndarray | None:
        """Embeddings of the concept names (computed once per index version, cached on disk)."""
        if self.snapshot.n_concepts == 0 or self.settings.query.concepts_per_subquery == 0:
            return None
        cache = self.settings.query.cache_dir or self.settings.home / "cache"
        return self.snapshot.concept_vectors(self.encode, cache)

    def focus(self) -> SentenceFocus:
        """The sentence focus of relevance tests and claim extraction (one per engine: it caches vectors)."""
        with self._setup_lock:
            if self._focus is None:
                q = self.settings.query
                self._focus = SentenceFocus(
                    self.snapshot, self.encode, self.count_tokens, q.focus_tokens, q.focus_lexical_weight
                )
            return self._focus

    def count_tokens(self, text: str) -> int:
        return len(_encoding(self.settings.chunking.encoding).encode(text, disallowed_special=()))

    def answer_window(self, synthesis_role: str) -> int:
        """Context tokens the answer model can take: its window minus the prompt and the answer."""
        cfg = self.settings.llm.relevance if synthesis_role == "relevance" else self.settings.llm.synthesis
        usable = int(cfg.n_ctx * self.settings.query.answer_context_share)
        return max(100, usable - self.settings.query.answer_max_tokens - PROMPT_OVERHEAD_TOKENS)

    # ---- planning ---------------------------------------------------------------------------------
    def plan(
        self,
        method: str = "lazy",
        preset: str | None = None,
        budget: int | None = None,
        context_tokens: int | None = None,
    ) -> Plan:
        """The query's plan (``plan_query``); a method the serving store cannot serve is refused here,
        before any model or table is read."""
        plan = plan_query(self.settings, method, preset, budget, context_tokens)
        if not self.has_snapshot:
            require_source(plan.method, "store")
        return plan

    # ---- one query --------------------------------------------------------------------------------
    def answer(
        self,
        question: str,
        method: str = "lazy",
        preset: str | None = None,
        budget: int | None = None,
        context_tokens: int | None = None,
        trace: bool = False,
    ) -> QueryResult:
        """Search, keep what fits in the answer model's context, answer once, and record the cost.

        Every LLM call of the query counts against ``query.timeout_s`` of active time."""
        with (
            query_deadline(self.settings.query.timeout_s),
            self.search(
                question, method, preset=preset, budget=budget, context_tokens=context_tokens, trace=trace
            ) as searched,
        ):
            if self.reader.n_chunks == 0:  # nothing was searched: nothing to cut
                context = Context()
            else:
                context = searched.context(self.context_limit(searched.plan, searched.recorder))
            answer = searched.answer(context)
            # The search's reader: on the store the lazy search names chunks by place in its working set.
            return shape_result(searched, context, answer, searched.method.reader, self.index_source)

    @contextmanager
    def search(
        self,
        question: str,
        method: str = "lazy",
        *,
        preset: str | None = None,
        budget: int | None = None,
        context_tokens: int | None = None,
        trace: bool = False,
        answering: bool = True,
    ) -> Iterator[SearchOutcome[Any]]:
        """Plan the query, check the question and run its search, up to the context cut.

        The query's LLM usage is recorded until the ``with`` block ends, so an answer made inside it
        counts in the same cost record. ``answering=False`` (the evaluation, which stops at the cut)
        loads only the models the search itself calls.
        """
        plan = self.plan(method, preset, budget, context_tokens)
        validate_question(question, self.settings, plan, self.count_tokens)  # before any model loads
        search = SEARCHES[plan.method](self)
        if self.reader.n_chunks == 0:  # nothing to search: no model is loaded or called
            recorder = CostRecorder(trace_enabled=trace, prompts=self.settings.query.prompts.model_dump())
            recorder.log("the index holds no chunks: nothing to search")
            yield SearchOutcome(question, plan, search, search.empty(question), recorder)
            return
        wanted = search.calls_models or answering
        roles = self.roles(plan.synthesis_role) if wanted else None  # a per-process cost, not the query's
        recorder = CostRecorder(trace_enabled=trace, prompts=self.settings.query.prompts.model_dump())
        try:
            with recorder.track([roles.relevance, roles.synthesis] if roles else []):
                retrieval = search.retrieve(question, plan, roles, recorder)
                yield SearchOutcome(question, plan, search, retrieval, recorder, roles)
        finally:
            self.flush_llm_cache()  # what this query learnt survives a crash of the next one

    def context_limit(self, plan: Plan, recorder: CostRecorder) -> int:
        """The plan's context limit, lowered to what the answer model's window takes (the cut ``answer``
        applies; a caller of ``search`` that answers cuts there too)."""
        limit = min(plan.context_tokens, self.answer_window(plan.synthesis_role))
        if limit < plan.context_tokens:
            recorder.log(f"context limited to {limit} tokens by the answer model's window")
        return limit


def plan_query(
    settings: Settings,
    method: str = "lazy",
    preset: str | None = None,
    budget: int | None = None,
    context_tokens: int | None = None,
) -> Plan:
    """Resolve preset, method, budget and context limit. A preset of a search without relevance tests
    (SS_*: vector) implies one (its own, or hybrid when asked for), and such a search defaults to
    SS_8K."""
    name = preset or settings.query.preset
    chosen = settings.preset(name)
    if method not in SEARCHES:
        raise ConfigError(f"unknown method {method!r}; use {', '.join(SEARCHES)}")
    if chosen.method not in SEARCHES:
        raise ConfigError(
            f"preset {name!r} names the unknown method {chosen.method!r}; set its method to one of "
            f"{', '.join(SEARCHES)}"
        )
    if preset is not None and not SEARCHES[chosen.method].calls_models and SEARCHES[method].calls_models:
        method = chosen.method
    if not SEARCHES[method].calls_models and preset is None:
        name = "SS_8K" if "SS_8K" in settings.presets else name
        chosen = settings.preset(name)
    if budget is not None and budget < 0:
        raise ConfigError("the relevance-test budget must be 0 or more")
    tests_relevance = SEARCHES[method].calls_models  # a search calling no model tests nothing
    return Plan(
        method=method,
        preset=name,
        budget=(chosen.budget if budget is None else budget) if tests_relevance else 0,
        context_tokens=context_tokens or chosen.context_tokens,
        synthesis_role=chosen.synthesis_role,
    )


def check_index_source(settings: Settings, method: str = "lazy", preset: str | None = None) -> None:
    """Refuse a query ``query.index_source`` cannot serve before the index or any model is opened
    (``IndexSourceError``): the method the plan resolves to (a preset may imply one) must be served."""
    require_source(plan_query(settings, method, preset).method, settings.query.index_source)


def choose_index_source(
    settings: Settings,
    index: str,
    method: str = "lazy",
    preset: str | None = None,
    console: Console | None = None,
) -> Source:
    """The source queries of ``method`` and ``preset`` read ``index`` from: ``query.index_source`` as
    set, or with ``auto`` the one ``resolve_index_source`` picks for the method the plan resolves to."""
    if settings.query.index_source != "auto":
        return settings.query.index_source
    return resolve_index_source(settings, index, plan_query(settings, method, preset).method, console)
