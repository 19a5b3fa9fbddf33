"""The RemoteStorageManager over an S3-compatible store (Kafka's RemoteStorageManager:
copyLogSegmentData, fetchLogSegment, fetchIndex, deleteLogSegmentData).

boto3 does the requests (signing, retries); every method blocks, so the broker calls them
from worker threads only (trio.to_thread), never on its event loop. Settings are Aiven's
`rsm.config.storage.*` names; without an access key boto3's credential chain applies.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from kafkalite.storage.remote import keys

CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 30
MAX_ATTEMPTS = 3


class RemoteStorageError(Exception):
    """The store failed or could not be reached (Kafka's RemoteStorageException)."""


@dataclass(frozen=True, slots=True)
class S3Settings:
    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    path_style: bool | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    key_prefix: str = ""

    @classmethod
    def from_properties(cls, get: Mapping[str, Any]) -> S3Settings:
        """From the broker's `rsm.config.*` values (None where unset)."""
        bucket = get.get("rsm.config.storage.s3.bucket.name")
        if not bucket:
            raise RemoteStorageError(
                "remote.log.storage.system.enable=true needs rsm.config.storage.s3.bucket.name"
            )
        return cls(
            bucket=bucket,
            endpoint_url=get.get("rsm.config.storage.s3.endpoint.url"),
            region=get.get("rsm.config.storage.s3.region"),
            path_style=get.get("rsm.config.storage.s3.path.style.access.enabled"),
            access_key_id=get.get("rsm.config.storage.aws.access.key.id"),
            secret_access_key=get.get("rsm.config.storage.aws.secret.access.key"),
            key_prefix=get.get("rsm.config.key.prefix") or "",
        )


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """What one segment uploads: files by object suffix, and in-memory objects (the leader
    epoch checkpoint cut to the segment)."""

    files: Mapping[str, Path]
    data: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class RemotePartition:
    topic: str
    topic_id: uuid.UUID
    partition: int


class S3RemoteStorageManager:
    def __init__(self, settings: S3Settings) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise RemoteStorageError(
                "tiered storage needs boto3: pip install 'kafkalite[tiered]'"
            ) from None
        self.settings = settings
        addressing = {True: "path", False: "virtual"}.get(settings.path_style, "auto")  # type: ignore[arg-type]
        config = Config(
            s3={"addressing_style": addressing},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
            # Checksums only where S3 requires them: S3-compatible stores differ on the
            # newer trailing checksums.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self._client = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            aws_access_key_id=settings.access_key_id,
            aws_secret_access_key=settings.secret_access_key,
            config=config,
        )

    def _key(
        self, partition: RemotePartition, base_offset: int, segment_id: uuid.UUID, suffix: str
    ) -> str:
        return keys.object_key(
            self.settings.key_prefix,
            partition.topic,
            partition.topic_id,
            partition.partition,
            base_offset,
            segment_id,
            suffix,
        )

    def copy_log_segment_data(
        self,
        partition: RemotePartition,
        base_offset: int,
        segment_id: uuid.UUID,
        segment: SegmentFiles,
        log_size: int,
    ) -> None:
        """Upload every object of one segment; the `.log` object holds its first `log_size`
        bytes (the segment is closed: no byte is appended after them)."""
        try:
            for suffix, path in segment.files.items():
                with open(path, "rb") as file:
                    whole = suffix != keys.LOG or os.fstat(file.fileno()).st_size == log_size
                    body = file if whole else file.read(log_size)  # a file streams
                    self._put(self._key(partition, base_offset, segment_id, suffix), body)
            for suffix, data in segment.data.items():
                self._put(self._key(partition, base_offset, segment_id, suffix), data)
        except RemoteStorageError:
            raise
        except OSError as exc:
            raise RemoteStorageError(f"reading segment {base_offset}: {exc}") from exc

    def _put(self, key: str, body: bytes | BinaryIO) -> None:
        try:
            self._client.put_object(Bucket=self.settings.bucket, Key=key, Body=body)
        except Exception as exc:  # botocore's errors, connection errors included
            raise RemoteStorageError(f"PUT {key}: {exc}") from exc

    def fetch(
        self,
        partition: RemotePartition,
        base_offset: int,
        segment_id: uuid.UUID,
        suffix: str,
        start: int = 0,
        end: int | None = None,
    ) -> bytes:
        """An object's bytes [start, end] (inclusive, as an HTTP range; end None: to its end).
        Kafka's fetchLogSegment (suffix .log) and fetchIndex (the index suffixes)."""
        key = self._key(partition, base_offset, segment_id, suffix)
        extra = {}
        if start or end is not None:
            extra["Range"] = f"bytes={start}-{'' if end is None else end}"
        try:
            answer = self._client.get_object(Bucket=self.settings.bucket, Key=key, **extra)
            return bytes(answer["Body"].read())
        except Exception as exc:
            raise RemoteStorageError(f"GET {key}: {exc}") from exc

    def delete_log_segment_data(
        self, partition: RemotePartition, base_offset: int, segment_id: uuid.UUID
    ) -> None:
        """Delete every object a segment may have (deleting a missing one succeeds)."""
        suffixes = (
            keys.LOG,
            keys.OFFSET_INDEX,
            keys.TIME_INDEX,
            keys.TXN_INDEX,
            keys.PRODUCER_SNAPSHOT,
            keys.LEADER_EPOCH,
        )
        for suffix in suffixes:
            key = self._key(partition, base_offset, segment_id, suffix)
            try:
                self._client.delete_object(Bucket=self.settings.bucket, Key=key)
            except Exception as exc:
                raise RemoteStorageError(f"DELETE {key}: {exc}") from exc

    def list_keys(self, prefix: str) -> list[str]:
        """Every key under `prefix` (for tests and tools)."""
        found: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.settings.bucket, Prefix=prefix):
                found.extend(item["Key"] for item in page.get("Contents", ()))
        except Exception as exc:
            raise RemoteStorageError(f"LIST {prefix}: {exc}") from exc
        return found
