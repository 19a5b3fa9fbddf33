//go:build tools

// Package franzgo pins franz-go for compat/franz_go/run.py, which runs the kgo package's own
// integration tests (pkg/kgo/*_test.go in the module zip) against kafkalite and Apache Kafka.
// Nothing here is built; the import keeps the requirement in go.mod under `go mod tidy`.
package franzgo

import _ "github.com/twmb/franz-go/pkg/kgo"
