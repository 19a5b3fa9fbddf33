// One share consumer on Apache Kafka's Java client (KafkaShareConsumer, KIP-932), for tests:
//
//   java -cp 'KAFKA_LIB/*' JavaShareConsumer.java BOOTSTRAP GROUP TOPIC COUNT [RELEASE_VALUE|--implicit]
//
// Run as a single source file (Java 11+ source launcher): no build step. Explicit mode: it
// acknowledges every record with ACCEPT, except the first delivery of RELEASE_VALUE, which it
// RELEASEs, and commits after each poll. With --implicit, implicit mode: no acknowledge calls,
// the records of a poll are accepted by the commit after it (and by close). Prints
// "record OFFSET DELIVERY_COUNT VALUE" per record, stops after COUNT records (or 30 s) and
// closes.

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class JavaShareConsumer {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        boolean implicit = args.length > 4 && args[4].equals("--implicit");
        props.put("share.acknowledgement.mode", implicit ? "implicit" : "explicit");
        int count = Integer.parseInt(args[3]);
        String release = args.length > 4 && !implicit ? args[4] : null;
        long deadline = System.currentTimeMillis() + 30_000;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            int seen = 0;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    short delivery = record.deliveryCount().orElse((short) -1);
                    System.out.println("record " + record.offset() + " " + delivery + " " + record.value());
                    boolean again = record.value().equals(release) && delivery == 1;
                    if (!implicit) {
                        consumer.acknowledge(record, again ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    }
                    seen++;
                }
                consumer.commitSync();
            }
        }
        System.out.println("closed");
    }
}
