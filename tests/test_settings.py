from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lazygraph.cli import app
from lazygraph.errors import ConfigError
from lazygraph.settings import RELEVANCE_PROFILES, describe_settings, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("LAZYGRAPH_") and name != "LAZYGRAPH_HOME":
            monkeypatch.delenv(name, raising=False)


def test_defaults_are_the_embedded_runtime() -> None:
    s = load_settings()
    assert s.spark.master == "local[*]"
    assert s.llm.relevance.backend == "llamacpp"
    assert s.ray.address is None
    assert s.preset("Z100_Lite").budget == 100
    # the embedded default is the configuration BENCHMARKS.md measures
    assert s.query.preset == "Z0_Lite" and s.preset("Z0_Lite").budget == 0
    assert s.preset("Z0_Lite").context_tokens == 1000 and s.preset("Z0_Lite").synthesis_role == "relevance"
    assert s.preset("Z20_Lite").budget == 20 and s.preset("Z20_Lite").context_tokens == 1000
    assert s.preset("Z1500").budget == 1500


def test_yaml_then_environment_then_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "lg.yaml"
    cfg.write_text("spark:\n  master: spark://yaml:7077\n  shuffle_partitions: 64\nray:\n  address: auto\n")
    s = load_settings(cfg)
    assert (s.spark.master, s.spark.shuffle_partitions, s.ray.address) == ("spark://yaml:7077", 64, "auto")

    monkeypatch.setenv("LAZYGRAPH_SPARK__MASTER", "yarn")
    s = load_settings(cfg)
    assert s.spark.master == "yarn"
    assert s.spark.shuffle_partitions == 64  # the rest of the YAML still applies

    s = load_settings(cfg, spark={"master": "local[2]"})
    assert s.spark.master == "local[2]"


def test_bad_value_is_one_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("chunking:\n  chunk_tokens: 100\n  overlap_tokens: 200\n")
    with pytest.raises(ConfigError, match="overlap_tokens must be smaller"):
        load_settings(cfg)
    cfg.write_text("spark:\n  shuffle_partitions: zero\n")
    with pytest.raises(ConfigError, match="spark.shuffle_partitions"):
        load_settings(cfg)
    cfg.write_text("no_such_section: 1\n")
    with pytest.raises(ConfigError, match="no_such_section"):
        load_settings(cfg)


def test_missing_or_malformed_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("spark: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(broken)


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="Z100_Lite"):
        load_settings().preset("Z9")


def test_cli_help_lists_every_subcommand() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("setup", "config", "index", "stats", "query", "batch", "eval", "demo", "bench"):
        assert command in result.output


def test_config_show_prints_effective_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAZYGRAPH_RAY__ADDRESS", "ray://head:10001")
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert '"ray://head:10001"' in result.output


def test_a_config_file_is_read_for_one_load_and_never_written_to_the_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "lg.yaml"
    cfg.write_text("ray:\n  address: auto\n")
    assert load_settings(cfg).ray.address == "auto"
    assert "LAZYGRAPH_CONFIG" not in os.environ
    assert load_settings().ray.address is None  # the next process-wide load knows nothing of it


def test_every_setting_is_described() -> None:
    described = describe_settings(load_settings())
    assert not [key for key, entry in described.items() if not entry["description"].strip()]
    assert described["query.focus_tokens"]["value"] == 200
    assert described["query.report_sources_per_theme"]["value"] == 4
    assert described["query.relevance.threshold"]["value"] is None


def test_config_show_describes_every_setting() -> None:
    result = CliRunner().invoke(app, ["config", "show", "--json", "--describe"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["query.context_fill_min"]["value"] == 0.1
    assert "prior" in shown["query.context_fill_min"]["description"]


def test_relevance_profiles_name_the_fitted_weights_and_explicit_weights_win() -> None:
    default = load_settings().query.relevance
    assert (default.profile, default.p_yes) == ("focus80", RELEVANCE_PROFILES["focus80"]["p_yes"])
    focus32 = load_settings(query={"relevance": {"profile": "focus32", "bm25": 2.0}}).query.relevance
    assert (focus32.p_yes, focus32.intercept) == (2.3866, -5.6773)
    assert focus32.bm25 == 2.0


def test_one_relevance_threshold_for_the_rule_in_force() -> None:
    rule = load_settings().query.relevance
    assert (rule.threshold_for("combined"), rule.threshold_for("p_yes")) == (0.15, 0.4)
    p_yes = load_settings(query={"relevance": {"rule": "p_yes", "threshold": 0.3}}).query.relevance
    assert (p_yes.threshold_for("p_yes"), p_yes.threshold_for("combined")) == (0.3, 0.15)
    with pytest.raises(ConfigError, match="query.relevance.threshold"):
        load_settings(query={"relevance_threshold": 0.3})
