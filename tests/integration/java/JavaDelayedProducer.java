// Apache Kafka's Java producer sending delayed records, for tests (issue 17): every odd
// record carries the header kafkalite-delay-ms; the producer is idempotent with acks=all (the
// Java client's defaults). Prints one line per record, "<value> <offset>" (the offset its
// produce answer gave: -1 for a record the broker holds), then "done".
//
//   java -cp 'KAFKA_LIB/*' JavaDelayedProducer.java BOOTSTRAP TOPIC COUNT DELAY_MS
//
// Run as a single source file (Java 11+ source launcher): no build step.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaDelayedProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        String delay = args[3];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("linger.ms", "20");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> record =
                    new ProducerRecord<>(topic, 0, "k" + i, "j" + i);
                if (i % 2 == 1) {
                    record.headers().add("kafkalite-delay-ms", delay.getBytes(StandardCharsets.US_ASCII));
                }
                sent.add(producer.send(record));
            }
            for (int i = 0; i < count; i++) {
                System.out.println("j" + i + " " + sent.get(i).get().offset());
            }
        }
        System.out.println("done");
    }
}
