// One consumer-group member on Apache Kafka's Java client, for tests: the Java twin of
// tests/integration/group_member.py, printing the same JSON events (ready, assigned, revoked,
// lost, message, committed, error, closed) so groups_helpers.Members drives both alike.
//
//   java -cp 'KAFKA_LIB/*' JavaGroupMember.java BOOTSTRAP GROUP TOPIC[,TOPIC...] [key=value]...
//
// Run as a single source file (Java 11+ source launcher): no build step. Commits the next
// offset of every record synchronously after each poll, and the revoked partitions' positions
// before giving them up. Stops with close() on a "stop" line on stdin or at stdin EOF.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class JavaGroupMember {
    private static final long PID = ProcessHandle.current().pid();
    private static final Set<String> OWNED = new TreeSet<>();

    static synchronized void emit(String event, String fields) {
        double t = System.nanoTime() / 1e9; // CLOCK_MONOTONIC, like Python's time.monotonic()
        System.out.println("{\"event\":\"" + event + "\",\"t\":" + t + ",\"pid\":" + PID
            + (fields.isEmpty() ? "" : "," + fields) + "}");
        System.out.flush();
    }

    static String quote(String text) {
        if (text == null) return "null";
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String partitions(Collection<String> keys) {
        List<String> items = new ArrayList<>();
        for (String key : new TreeSet<>(keys)) {
            int cut = key.lastIndexOf(':');
            items.add("[" + quote(key.substring(0, cut)) + "," + key.substring(cut + 1) + "]");
        }
        return "[" + String.join(",", items) + "]";
    }

    static List<String> keys(Collection<TopicPartition> partitions) {
        List<String> keys = new ArrayList<>();
        for (TopicPartition tp : partitions) keys.add(tp.topic() + ":" + tp.partition());
        return keys;
    }

    static void report(String event, Collection<TopicPartition> partitions) {
        emit(event, "\"partitions\":" + partitions(keys(partitions))
            + ",\"assignment\":" + partitions(OWNED));
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        for (String item : Arrays.copyOfRange(args, 3, args.length)) {
            int eq = item.indexOf('=');
            props.put(item.substring(0, eq), item.substring(eq + 1));
        }
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                commit(consumer, pending);
                OWNED.removeAll(keys(partitions));
                report("revoked", partitions);
            }

            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                OWNED.addAll(keys(partitions));
                report("assigned", partitions);
            }

            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                pending.keySet().removeAll(partitions);
                OWNED.removeAll(keys(partitions));
                report("lost", partitions);
            }
        };
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception ignored) { }
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        consumer.subscribe(Arrays.asList(args[2].split(",")), listener);
        emit("ready", "");
        stdin.start();
        try {
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<String, String> r : records) {
                    emit("message", "\"topic\":" + quote(r.topic()) + ",\"partition\":"
                        + r.partition() + ",\"offset\":" + r.offset() + ",\"key\":"
                        + quote(r.key()) + ",\"value\":" + quote(r.value()));
                    pending.put(new TopicPartition(r.topic(), r.partition()),
                        new OffsetAndMetadata(r.offset() + 1));
                }
                commit(consumer, pending);
            }
        } catch (WakeupException stop) {
            commit(consumer, pending); // wakeup() fires once: this commit runs normally
        } catch (KafkaException e) {
            // The consumer-protocol client wraps what a rebalance callback throws: a wakeup
            // that lands in onPartitionsRevoked's commit is the stop request too.
            if (!(e.getCause() instanceof WakeupException)) throw e;
            commit(consumer, pending);
        }
        consumer.close();
        emit("closed", "");
    }

    static void commit(KafkaConsumer<String, String> consumer,
                       Map<TopicPartition, OffsetAndMetadata> pending) {
        if (pending.isEmpty()) return;
        try {
            consumer.commitSync(pending);
            pending.clear();
        } catch (WakeupException stop) {
            throw stop; // the stop request, not a failed commit: the caller closes
        } catch (RuntimeException e) {
            emit("commit_failed", "\"error\":" + quote(e.toString()));
            pending.clear();
        }
    }
}
