// A transactional producer on Apache Kafka's Java client, for tests: one committed and one
// aborted transaction over the given partitions, then "done" on stdout.
//
//   java -cp 'KAFKA_LIB/*' JavaTxnProducer.java BOOTSTRAP TOPIC TRANSACTIONAL_ID PARTITIONS
//
// Transaction 1 writes "java-c<i>" to partition i % PARTITIONS for i < 2 * PARTITIONS and
// commits; transaction 2 writes "java-x<i>" likewise, flushes and aborts. Run as a single
// source file (Java 11+ source launcher): no build step.

import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaTxnProducer {
    public static void main(String[] args) {
        String topic = args[1];
        int partitions = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", args[2]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            String[] kinds = {"c", "x"};
            for (String kind : kinds) {
                producer.beginTransaction();
                for (int i = 0; i < 2 * partitions; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, "java-" + kind + i));
                }
                producer.flush();
                if (kind.equals("c")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
        }
        System.out.println("done");
    }
}
