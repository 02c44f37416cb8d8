"""The one typed place for configuration, one module per section.

- load: ``Settings`` (every section), ``load_settings`` (defaults < YAML file < environment < code),
  ``get_settings`` (a process's settings, at its start) and ``describe_settings``;
- storage, runtime (Spark, Ray), models (LLM roles, embedding), indexing (chunking, watch, the writer
  lease, maintenance, concepts, graph, communities), retrieval (BM25, the vector index), serving (the
  Lance serving store);
- query: what every method's answer shares, prompts, the LLM cache, presets; lazy: the lazy search's
  own settings; relevance: its relevance rule, with the named profiles of fitted weights.

Every field carries its description (``lazygraph config show --describe``). Settings are built where a
process starts and handed down; nothing below an entry point reads them from the environment.
"""

from lazygraph.settings.indexing import (
    ChunkingSettings,
    CommunitySettings,
    ConceptSettings,
    GraphSettings,
    MaintenanceSettings,
    WatchSettings,
    WriterSettings,
)
from lazygraph.settings.lazy import LazySearchSettings
from lazygraph.settings.load import (
    Settings,
    check_config_file,
    default_home,
    describe_settings,
    get_settings,
    load_settings,
)
from lazygraph.settings.models import EmbeddingSettings, LLMBackendSettings, LLMSettings
from lazygraph.settings.query import (
    AnswerSettings,
    LLMCacheSettings,
    PresetSettings,
    PromptVersions,
    QuerySettings,
)
from lazygraph.settings.relevance import CALIBRATED_THRESHOLDS, RELEVANCE_PROFILES, RelevanceRuleSettings
from lazygraph.settings.retrieval import LexicalSettings, VectorIndexSettings
from lazygraph.settings.runtime import RaySettings, SparkSettings
from lazygraph.settings.serving import ServingStoreSettings
from lazygraph.settings.storage import MASKED, StorageSettings

__all__ = [
    "CALIBRATED_THRESHOLDS",
    "MASKED",
    "RELEVANCE_PROFILES",
    "AnswerSettings",
    "ChunkingSettings",
    "CommunitySettings",
    "ConceptSettings",
    "EmbeddingSettings",
    "GraphSettings",
    "LLMBackendSettings",
    "LLMCacheSettings",
    "LLMSettings",
    "LazySearchSettings",
    "LexicalSettings",
    "MaintenanceSettings",
    "PresetSettings",
    "PromptVersions",
    "QuerySettings",
    "RaySettings",
    "RelevanceRuleSettings",
    "Settings",
    "ServingStoreSettings",
    "SparkSettings",
    "StorageSettings",
    "VectorIndexSettings",
    "WatchSettings",
    "WriterSettings",
    "check_config_file",
    "default_home",
    "describe_settings",
    "get_settings",
    "load_settings",
]
