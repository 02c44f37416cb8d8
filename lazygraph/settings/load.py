"""The settings as a whole, and building them from defaults, a YAML file, the environment and code.

Precedence (highest first): explicit overrides passed by code or CLI flags, environment variables
(``LAZYGRAPH_`` prefix, ``__`` between levels, e.g. ``LAZYGRAPH_SPARK__MASTER=spark://host:7077``), the
YAML file given to ``load_settings`` (``--config``), else the one ``LAZYGRAPH_CONFIG`` names, then the
defaults, which are the embedded single-machine runtime.

Settings are built once, where a process starts (the CLI, a job's entry point, a notebook), and passed
down to everything that needs them; ``get_settings`` is that process-wide build for entry points that
take no options.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from lazygraph.errors import ConfigError
from lazygraph.settings.indexing import (
    ChunkingSettings,
    CommunitySettings,
    ConceptSettings,
    GraphSettings,
    MaintenanceSettings,
    WatchSettings,
    WriterSettings,
)
from lazygraph.settings.models import EmbeddingSettings, LLMSettings
from lazygraph.settings.query import PresetSettings, QuerySettings, default_presets
from lazygraph.settings.retrieval import LexicalSettings, VectorIndexSettings
from lazygraph.settings.runtime import RaySettings, SparkSettings
from lazygraph.settings.serving import ServingStoreSettings
from lazygraph.settings.storage import StorageSettings

# The YAML file of the settings being built (``load_settings``'s ``config``), read by the sources below.
_CONFIG_FILE: ContextVar[Path | None] = ContextVar("lazygraph_config_file", default=None)


def default_home() -> Path:
    """Cache root for the virtual environment, jars and model file."""
    return Path(os.environ.get("LAZYGRAPH_HOME", Path.home() / ".cache" / "lazygraph"))


class Settings(BaseSettings):
    """Every setting of lazygraph, one section per part of it."""

    model_config = SettingsConfigDict(env_prefix="LAZYGRAPH_", env_nested_delimiter="__", extra="forbid")

    home: Path = Field(
        default_factory=default_home,
        description="Cache root: environment, jars, model files (LAZYGRAPH_HOME).",
    )
    storage: StorageSettings = Field(default_factory=StorageSettings, description="Where indexes live.")
    spark: SparkSettings = Field(default_factory=SparkSettings, description="The index job's Spark session.")
    ray: RaySettings = Field(default_factory=RaySettings, description="Batch querying on Ray.")
    llm: LLMSettings = Field(default_factory=LLMSettings, description="The LLM of each role.")
    embedding: EmbeddingSettings = Field(
        default_factory=EmbeddingSettings, description="The embedding model."
    )
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings, description="Documents into chunks.")
    watch: WatchSettings = Field(default_factory=WatchSettings, description="`lazygraph index --watch`.")
    writer: WriterSettings = Field(
        default_factory=WriterSettings, description="The writer lease: one run at a time writes an index."
    )
    maintenance: MaintenanceSettings = Field(
        default_factory=MaintenanceSettings, description="`lazygraph maintain`: compaction and removal."
    )
    concepts: ConceptSettings = Field(default_factory=ConceptSettings, description="Concept extraction.")
    graph: GraphSettings = Field(default_factory=GraphSettings, description="Graph pruning.")
    communities: CommunitySettings = Field(
        default_factory=CommunitySettings, description="Community detection."
    )
    query: QuerySettings = Field(default_factory=QuerySettings, description="Querying and answering.")
    lexical: LexicalSettings = Field(default_factory=LexicalSettings, description="BM25 and rank fusion.")
    vectors: VectorIndexSettings = Field(
        default_factory=VectorIndexSettings, description="The approximate vector index."
    )
    serving: ServingStoreSettings = Field(
        default_factory=ServingStoreSettings, description="The Lance serving store (`lazygraph store`)."
    )
    presets: dict[str, PresetSettings] = Field(
        default_factory=default_presets, description="Named query set-ups (--preset)."
    )

    @field_validator("presets")
    @classmethod
    def _presets_not_empty(cls, value: dict[str, PresetSettings]) -> dict[str, PresetSettings]:
        if not value:
            raise ValueError("at least one preset must be defined")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Explicit values beat the environment, which beats the YAML file, read at the lowest priority.
        path = _CONFIG_FILE.get() or os.environ.get("LAZYGRAPH_CONFIG")
        if not path:
            return (init_settings, env_settings)
        check_config_file(Path(path))
        return (init_settings, env_settings, YamlConfigSettingsSource(settings_cls, yaml_file=path))

    @property
    def jars_dir(self) -> Path:
        return self.spark.jars_dir or self.home / "jars"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    def preset(self, name: str) -> PresetSettings:
        if name not in self.presets:
            known = ", ".join(sorted(self.presets))
            raise ConfigError(f"unknown preset {name!r}; choose one of: {known}")
        return self.presets[name]


def check_config_file(path: Path) -> None:
    """A missing, unparsable or non-mapping config file is one clear error (the YAML source itself
    would skip a missing file silently)."""
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass an existing YAML file to --config")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings at the top level")


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build the effective settings from ``config`` (else LAZYGRAPH_CONFIG's file), the environment and
    ``overrides``; every validation problem becomes one ConfigError."""
    token = _CONFIG_FILE.set(Path(config) if config is not None else None)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(
            f"invalid settings: {problems}. Fix the YAML file or the LAZYGRAPH_* variables."
        ) from exc
    finally:
        _CONFIG_FILE.reset(token)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """This process's settings from the environment (and LAZYGRAPH_CONFIG), built once: for entry points
    that take no options. Everything below an entry point is handed its settings."""
    return load_settings()


def describe_settings(model: BaseModel, prefix: str = "") -> dict[str, dict[str, Any]]:
    """Every setting by its dotted key, with its effective value (credentials masked) and description."""
    values = model.model_dump(mode="json")
    described: dict[str, dict[str, Any]] = {}
    for name, field in type(model).model_fields.items():
        key = f"{prefix}{name}"
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            described.update(describe_settings(value, f"{key}."))
        else:
            described[key] = {"value": values[name], "description": field.description or ""}
    return described
