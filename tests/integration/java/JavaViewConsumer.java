// A consumer group on Apache Kafka's Java client (KafkaConsumer) that reads a topic in two
// sessions, for tests:
//
//   java -cp 'KAFKA_LIB/*' JavaViewConsumer.java BOOTSTRAP GROUP TOPIC FIRST TOTAL
//
// Run as a single source file (no build step). The first consumer takes FIRST records,
// commits the offsets after them (commitSync with explicit offsets) and closes; a second
// consumer in the same group resumes from the committed offsets and takes the rest, up to
// TOTAL. Prints "record SESSION PARTITION OFFSET VALUE" per record, then "done" (30 s limit).

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class JavaViewConsumer {
    public static void main(String[] args) {
        int first = Integer.parseInt(args[3]);
        int total = Integer.parseInt(args[4]);
        long deadline = System.currentTimeMillis() + 30_000;
        int seen = session(args, 1, first, deadline);
        seen += session(args, 2, total - seen, deadline);
        System.out.println(seen == total ? "done" : "timed out");
    }

    static int session(String[] args, int number, int count, long deadline) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        int seen = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    if (seen == count) {
                        break; // not committed: the next session reads it again
                    }
                    System.out.println("record " + number + " " + record.partition() + " "
                            + record.offset() + " " + record.value());
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    seen++;
                }
            }
            consumer.commitSync(next);
        }
        return seen;
    }
}
