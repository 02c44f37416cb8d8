"""Where indexes live and how Spark, deltalake and pyarrow reach object stores."""

from __future__ import annotations

import re
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)

from lazygraph.runtime.storage import delta_storage_options, location_problem

# Keys of the free-form storage dicts whose values are credentials: masked wherever settings are shown
# or recorded (`lazygraph config show`, the manifest's settings_json), as SecretStr fields are.
_SECRET_KEY = re.compile(
    r"secret|password|passwd|token|sas|signature|private|access[._-]?key|account[._-]?key|(?<![a-z])key(?![a-z])",
    re.IGNORECASE,
)
MASKED = "**********"


def _masked(values: dict[str, str]) -> dict[str, str]:
    return {key: MASKED if _SECRET_KEY.search(key) else value for key, value in values.items()}


class StorageSettings(BaseModel):
    """Where indexes live and how Spark, deltalake and pyarrow reach object stores.

    Locations are URIs: a local path or file://, s3a:// (s3:// is the same bucket), abfss://, gs://,
    hdfs://. One set of credentials feeds every client (``lazygraph/runtime/storage.py``): Spark as
    ``spark.hadoop.fs.s3a.*`` keys, deltalake as ``storage_options``, pyarrow as its S3 filesystem.
    Without keys each client uses its default chain (environment, instance profile, workload identity).
    """

    # A misspelt credential key must fail loudly, not leave a job reading with no credentials.
    model_config = ConfigDict(extra="forbid")

    index: str = Field(
        "file://./work/index",
        description="Where an index lives when --index is not given; a bare path means a local directory.",
    )
    s3_endpoint: str | None = Field(
        None, description="S3-compatible endpoint (MinIO, Ceph), e.g. http://minio:9000; None is AWS itself."
    )
    s3_region: str | None = Field(None, description="The S3 region (None: the client's default).")
    s3_access_key_id: SecretStr | None = Field(
        None, description="S3 access key id (None: the default credential chain)."
    )
    s3_secret_access_key: SecretStr | None = Field(None, description="S3 secret access key.")
    s3_session_token: SecretStr | None = Field(None, description="S3 session token of temporary credentials.")
    s3_path_style_access: bool = Field(
        False,
        description="Address buckets as endpoint/bucket/key, not bucket.endpoint/key (MinIO needs it).",
    )
    hadoop_conf: dict[str, str] = Field(
        default_factory=dict,
        description="Further Hadoop keys for Spark (e.g. fs.azure.account.key.ACCOUNT.dfs.core.windows.net, "
        "fs.gs.*).",
    )
    delta_storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Further deltalake storage_options (e.g. aws_conditional_put: etag, "
        "google_service_account_path).",
    )

    @field_validator("index")
    @classmethod
    def _supported_location(cls, value: str) -> str:
        problem = location_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint_is_a_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"s3_endpoint must start with http:// or https:// (got {value!r})")
        return value.rstrip("/") if value else value

    @model_validator(mode="after")
    def _keys_in_pairs(self) -> StorageSettings:
        if (self.s3_access_key_id is None) != (self.s3_secret_access_key is None):
            raise ValueError("set both s3_access_key_id and s3_secret_access_key, or neither")
        if self.s3_session_token is not None and self.s3_access_key_id is None:
            raise ValueError("s3_session_token needs s3_access_key_id and s3_secret_access_key")
        return self

    @field_serializer("hadoop_conf", "delta_storage_options")
    def _mask_credentials(self, value: dict[str, str]) -> dict[str, str]:
        return _masked(value)

    def __repr_args__(self) -> Any:
        # Reprs end up in logs and tracebacks: mask there too.
        for name, value in super().__repr_args__():
            yield name, _masked(value) if name in ("hadoop_conf", "delta_storage_options") else value

    def delta_options(self, uri: str | None = None) -> dict[str, str]:
        """deltalake ``storage_options`` for ``uri`` (empty for a local table)."""
        return delta_storage_options(self, uri)
