"""Cluster mode on ZooKeeper: the server process, the trio-side client, Kafka's znode layout."""
