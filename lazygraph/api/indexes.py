"""Building an index and opening one: ``index`` and ``open_index`` -> ``Index``.

Every function takes the settings it runs under (``load_settings``: defaults < YAML < environment <
code; None builds them from the environment once, here, as a process's entry point does) and a console
for progress (None: stderr). The heavy parts (Spark, the models) are imported and loaded only when a
call needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from lazygraph.api.types import Answer, Chunk, QueryTrace
from lazygraph.errors import InputError
from lazygraph.settings import Settings, load_settings

if TYPE_CHECKING:
    import pandas as pd

    from lazygraph.query.engine import QueryEngine


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else load_settings()


def _console(console: Console | None) -> Console:
    return console if console is not None else Console(stderr=True)


def index(
    input: str | None = None,
    *,
    index: str | None = None,
    append: bool = False,
    delete: str | None = None,
    watch: bool = False,
    once: bool = False,
    settings: Settings | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """Build, append to or delete from an index, or keep indexing what lands in ``input``; the run report.

    ``input``: JSON Lines {doc_id, title, text} or a folder of .txt/.md (with ``watch``: a landing folder
    or a Delta table of documents); ``delete``: a file of document ids or a Delta table of doc_id;
    ``index``: where (default ``storage.index``).
    """
    from lazygraph import pipeline

    settings = _settings(settings)
    target = index or settings.storage.index
    console = _console(console)
    if once and not watch:
        raise InputError("--once goes with --watch (index what has landed so far, then stop)")
    if watch:
        if input is None or delete is not None:
            raise InputError("--watch needs --input (a landing folder or a Delta table) and no --delete")
        from lazygraph.ingest.watch import watch_index

        return watch_index(settings, input_path=input, index=target, console=console, once=once)
    if delete is not None:
        # A run of its own: mixing it with new documents would make one run both add and remove.
        if append or input is not None:
            raise InputError(
                "--delete cannot be combined with --append or --input; delete in one run, append in another"
            )
        return pipeline.delete_documents(settings, ids_path=delete, index=target, console=console)
    if input is None:
        raise InputError("give --input DOCS to build or append, or --delete IDS to remove documents")
    return pipeline.build_index(settings, input_path=input, index=target, append=append, console=console)


def maintain(
    index: str | None = None,
    *,
    dry_run: bool = False,
    settings: Settings | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """Compact the index's tables (OPTIMIZE) and remove the files no live run needs (VACUUM), under the
    writer lease; keeps every file the last ``maintenance.keep_runs`` runs, and those of the last
    ``maintenance.keep_hours``, pin, and the serving stores those runs name (the current one is built
    when missing). ``dry_run``: only report what would be compacted and removed. The report: the live
    runs, the files and bytes removed per table, the serving stores removed."""
    from lazygraph.tables.maintain import maintain_index

    settings = _settings(settings)
    return maintain_index(settings, index or settings.storage.index, _console(console), dry_run=dry_run)


def has_index(index: str | None = None, settings: Settings | None = None) -> bool:
    """Whether ``index`` holds a complete run (an index a query can open)."""
    from lazygraph import manifest, tables

    settings = _settings(settings)
    uri = tables.normalise_index_uri(index or settings.storage.index)
    return manifest.last_complete_run(uri, settings) is not None


def open_index(
    index: str | None = None, *, settings: Settings | None = None, console: Console | None = None
) -> Index:
    """The index at ``index`` (default ``storage.index``); nothing is read until it is used."""
    settings = _settings(settings)
    return Index(index or settings.storage.index, settings, _console(console))


class Index:
    """An index opened for querying, batch answering, statistics and evaluation.

    The index snapshot and the models are loaded on the first query (and kept for the next ones); the
    evaluations reuse them when a query has loaded them.
    """

    def __init__(self, location: str, settings: Settings, console: Console) -> None:
        self.location = location
        self.settings = settings
        self.console = console
        self._engine: QueryEngine | None = None

    def engine(self, method: str = "lazy", preset: str | None = None) -> QueryEngine:
        """The query engine over this index, loaded once for queries of ``method`` and ``preset``
        (which, with ``query.index_source: auto``, choose its source), and again only when an engine
        on the serving store is asked for a method the store cannot serve."""
        from lazygraph.query.engine import QueryEngine, plan_query
        from lazygraph.query.search import SEARCHES

        engine = self._engine
        # A snapshot serves every method; a store only some, so another method may need a new engine.
        planned = SEARCHES[plan_query(self.settings, method, preset).method]
        if engine is not None and not engine.has_snapshot and not planned.store_serves(engine.reader.store):
            engine = None
        if engine is None:
            engine = QueryEngine.open(
                self.settings, self.location, console=self.console, method=method, preset=preset
            )
            self._engine = engine
        return engine

    # ---- querying ---------------------------------------------------------------------------------
    def query(
        self,
        question: str,
        *,
        method: str = "lazy",
        preset: str | None = None,
        budget: int | None = None,
        context_tokens: int | None = None,
        trace: bool = False,
    ) -> Answer:
        """Answer ``question`` with citations and a cost record (``trace``: keep the search's trace)."""
        from lazygraph.query.engine import check_index_source
        from lazygraph.query.question import require_question

        require_question(question)  # before the index or any model is opened
        check_index_source(self.settings, method, preset)
        result = self.engine(method, preset).answer(
            question, method=method, preset=preset, budget=budget, context_tokens=context_tokens, trace=trace
        )
        return Answer.from_record(result.to_json(), result.trace, result.context_text)

    def trace(
        self,
        question: str,
        *,
        method: str = "lazy",
        budget: int | None = None,
        context_tokens: int | None = None,
    ) -> QueryTrace:
        """Answer ``question`` and keep every step: the chunks judged, each subquery's search, the claims
        ranked and kept, the context read (see ``QueryTrace``)."""
        from lazygraph.api.trace import trace_query
        from lazygraph.query.engine import check_index_source

        check_index_source(self.settings, method)
        return trace_query(self.engine(method), question, method, budget, context_tokens)

    def batch(
        self,
        queries: Path | str,
        out: str,
        *,
        method: str = "lazy",
        preset: str | None = None,
        budget: int | None = None,
        rerun_stale: bool = True,
    ) -> dict[str, Any]:
        """Answer a queries file through a pool of Ray actors into the Delta table ``out`` (resumable:
        queries already answered there by the index as it is now are skipped; with ``rerun_stale``
        False, so are those an older version of the index answered); the run's report."""
        from lazygraph.serve.batch import run_batch

        return run_batch(
            self.settings,
            index=self.location,
            queries_file=Path(queries),
            out=out,
            preset=preset,
            budget=budget,
            method=method,
            console=self.console,
            rerun_stale=rerun_stale,
        )

    # ---- reading ----------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Row counts per table, graph statistics, community levels and sizes, the last run."""
        from lazygraph.stats import index_stats

        return index_stats(self.settings, self.location)

    def show(self, chunk_or_doc_id: str) -> list[Chunk]:
        """A cited chunk with its document, or every chunk of a document."""
        from lazygraph.query.show import find_chunks

        return [Chunk(**found) for found in find_chunks(self.location, chunk_or_doc_id, self.settings)]

    def table(self, name: str) -> pd.DataFrame:
        """One table of the index (``TABLES``), as of its last complete run."""
        from lazygraph import manifest, tables

        if name not in tables.ALL_TABLES:
            raise InputError(f"unknown table {name!r}; choose one of: {', '.join(tables.ALL_TABLES)}")
        uri = tables.normalise_index_uri(self.location)
        _, versions = manifest.complete_versions(uri, self.settings)
        pinned = manifest.open_complete(uri, [name], versions, self.settings)
        if pinned.get(name) is None:
            raise InputError(f"the index at {uri} has no {name} table")
        from lazygraph.tables.read import read_table

        return read_table(pinned[name], self.settings).to_pandas()

    # ---- evaluation ---------------------------------------------------------------------------------
    def eval_retrieval(
        self, questions: Path, out: Path, *, budget: int, context_tokens: int = 1000, limit: int | None = None
    ) -> dict[str, Any]:
        """Gold-document recall of every method at the same context limit; the report (written to ``out``)."""
        from lazygraph.eval.retrieval import run_retrieval_eval

        return run_retrieval_eval(
            self.settings,
            index=self.location,
            questions_file=questions,
            budget=budget,
            context_tokens=context_tokens,
            limit=limit,
            out_file=out,
            console=self.console,
            engine=self._engine,
        )

    def eval_answers(
        self,
        questions: Path,
        out: Path,
        *,
        methods: Sequence[str] | None = None,
        budgets: Sequence[int] = (50,),
        limits: Sequence[int] = (1000,),
        skip: int = 0,
        limit: int | None = None,
        span: bool = True,
        equal_cost: bool = True,
    ) -> dict[str, Any]:
        """Answer quality against gold answers (HotpotQA EM and F1) per method, budget and context limit;
        rows appended to ``out`` (resumable), the summary beside it. ``equal_cost`` applies when lazy is
        compared with other methods."""
        from lazygraph.eval.answers import evaluate_answers

        methods = _methods(methods)
        return evaluate_answers(
            self.settings,
            self.location,
            questions,
            out,
            self.console,
            methods=methods,
            budgets=list(budgets),
            limits=list(limits),
            skip=skip,
            limit=limit,
            span=span,
            equal_cost=equal_cost and "lazy" in methods and len(methods) > 1,
            engine=self._engine,
        )

    def eval_relevance(
        self,
        questions: Path,
        out: Path,
        *,
        skip: int = 0,
        limit: int | None = None,
        top: int = 10,
        prompt_versions: Sequence[int] = (),
        target_recall: float = 0.9,
    ) -> dict[str, Any]:
        """Calibrate relevance on the ``top`` passages of each question after the first ``skip``: how
        P(yes) (per prompt version), similarity and BM25 separate gold passages, alone and combined,
        and the highest threshold that keeps ``target_recall`` of them; the report (written to ``out``)."""
        from lazygraph.eval.relevance import calibrate_relevance

        return calibrate_relevance(
            self.settings,
            self.location,
            questions,
            out,
            self.console,
            skip=skip,
            limit=limit,
            top=top,
            prompt_versions=prompt_versions,
            target_recall=target_recall,
            engine=self._engine,
        )

    def eval_questions(
        self,
        out: Path,
        *,
        n_local: int = 10,
        n_global: int = 10,
        oversample: float = 1.5,
        seed: int = 42,
        role: str = "synthesis",
        passages: int = 5,
        passage_tokens: int = 250,
        qed_dir: Path | None = None,
    ) -> dict[str, Any]:
        """Generate local and global questions from the index, AutoQ-style: ``oversample`` candidates per
        question kept, written by the LLM ``role``, a global one from ``passages`` passages of
        ``passage_tokens`` tokens; the questions to ``out`` (and benchmark-qed's form to ``qed_dir``)."""
        from lazygraph.eval.questions import generate_questions

        return generate_questions(
            self.settings,
            self.location,
            out,
            self.console,
            n_local=n_local,
            n_global=n_global,
            oversample=oversample,
            seed=seed,
            role=role,
            passages=passages,
            passage_tokens=passage_tokens,
            qed_dir=qed_dir,
            snapshot=self._loaded_snapshot(),
        )

    def _loaded_snapshot(self) -> Any:
        """The snapshot a query has loaded already (None: none loaded, or the engine reads the store)."""
        engine = self._engine
        return engine.snapshot if engine is not None and engine.has_snapshot else None

    def eval_sweep(
        self,
        questions: Path,
        out: Path,
        *,
        methods: Sequence[str] | None = None,
        budgets: Sequence[int] = (20, 50, 100),
        limits: Sequence[int] = (1000,),
        quality: str = "auto",
        reference: str = "vector",
        judge_role: str = "synthesis",
        trials: int = 2,
        temperature: float = 0.0,
        skip: int = 0,
        limit: int | None = None,
        qed_dir: Path | None = None,
        qed_question_set: str = "questions",
        equal_cost: bool = True,
    ) -> dict[str, Any]:
        """Quality (``quality``: auto, f1, recall, or judge: the win rate against ``reference``, judged by
        the LLM ``judge_role``) against LLM tokens and seconds per answer, across methods and budgets:
        rows, table and plot next to ``out``. ``equal_cost`` applies when lazy is compared with others."""
        from lazygraph.eval.sweep import evaluate_sweep

        methods = _methods(methods)
        return evaluate_sweep(
            self.settings,
            self.location,
            questions,
            out,
            self.console,
            methods=methods,
            budgets=list(budgets),
            limits=list(limits),
            quality=quality,
            reference=reference,
            judge_role=judge_role,
            trials=trials,
            temperature=temperature,
            skip=skip,
            limit=limit,
            qed_dir=qed_dir,
            qed_question_set=qed_question_set,
            equal_cost=equal_cost and "lazy" in methods and len(methods) > 1,
            engine=self._engine,
        )


def _methods(methods: Sequence[str] | None) -> list[str]:
    from lazygraph.query.search import SEARCHES

    return list(SEARCHES) if methods is None else list(dict.fromkeys(methods))
