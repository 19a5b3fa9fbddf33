// Command topicreader reads a topic from the beginning with franz-go's kgo, for tests:
//
//	topicreader BOOTSTRAP TOPIC COUNT
//
// It prints "record PARTITION OFFSET VALUE" per record and stops after COUNT records (or
// 30 s), then prints "done" (or "timed out").
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	count, err := strconv.Atoi(os.Args[3])
	if err != nil {
		panic(err)
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(os.Args[1]),
		kgo.ConsumeTopics(os.Args[2]),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := 0
	for seen < count && ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachError(func(topic string, partition int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "error %s %d: %v\n", topic, partition, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			fmt.Printf("record %d %d %s\n", r.Partition, r.Offset, r.Value)
			seen++
		})
	}
	if seen == count {
		fmt.Println("done")
	} else {
		fmt.Println("timed out")
	}
}
