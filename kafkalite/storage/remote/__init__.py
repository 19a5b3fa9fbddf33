"""Tiered storage (KIP-405): closed segments copied to an object store and read back.

- `keys`: the object key layout (Aiven's tiered-storage plugin's, with Kafka's file suffixes).
- `metadata`: RemoteLogSegmentMetadata and a partition's durable list of remote segments.
- `s3_storage`: the RemoteStorageManager over S3 (boto3; blocking, for worker threads).
- `reader`: whole batches of a remote segment from a fetch offset, with a bounded cache.

The broker's RemoteLogManager (broker/remote_log_manager.py) drives them.
"""
