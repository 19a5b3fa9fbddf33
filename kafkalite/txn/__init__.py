"""The transaction coordinator (Kafka's TransactionCoordinator), sans-IO."""
