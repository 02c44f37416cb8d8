"""Every error lazygraph raises on purpose: one class per cause, each message says what to do."""


class LazyGraphError(Exception):
    """Base class; the CLI prints the message alone (no stack trace) and exits with status 2."""


class ConfigError(LazyGraphError):
    """A setting is missing, malformed or inconsistent."""


class SetupError(LazyGraphError):
    """The runtime is not ready: Java, jars, model file or a package is missing."""


class ModelPartMissingError(SetupError):
    """One of the PyPI packages that carry the embedded model is not installed."""


class ModelCorruptError(SetupError):
    """The assembled model file does not match its expected size or checksum."""


class JarResolutionError(SetupError):
    """A Spark jar could not be fetched from Maven or failed its checksum."""


class InputError(LazyGraphError):
    """The documents or questions given are unusable as a whole (bad path, bad format)."""


class IndexNotFoundError(LazyGraphError):
    """The index directory has no (complete) lazygraph index."""


class IndexStateError(LazyGraphError):
    """The index exists but is inconsistent or incompatible with this operation."""


class IndexFileError(IndexStateError):
    """A data file of an index table is missing or is not readable Parquet."""


class SparkMemoryError(IndexStateError):
    """A Spark task ran out of Java heap: the run needs more memory per task, or smaller tasks."""


class LLMError(LazyGraphError):
    """An LLM backend failed after its retries, or returned something unusable."""


class StoreOutOfDateError(IndexStateError):
    """The serving store is missing, unfinished or built from table versions the index's manifest no
    longer names; rebuild it with `lazygraph store build`."""


class IndexSourceError(ConfigError):
    """The query method asked for cannot read the index source set (``query.index_source``)."""
