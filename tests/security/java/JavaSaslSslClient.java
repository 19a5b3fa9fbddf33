// Apache Kafka's Java producer and consumer over SASL_SSL with SCRAM-SHA-256 and a PEM
// truststore (tests/security/test_stock_clients_sasl_ssl.py): produces `count` records to
// the allowed topic, reads them back (assigned, from the beginning), then produces to the
// denied topic. Prints "consumed <n>" and "denied <exception class>" (or "denied none").
// Run: java -cp '<kafka libs>/*' JavaSaslSslClient.java bootstrap ca.pem user password allowed denied count
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaSaslSslClient {
    private static final long START = System.currentTimeMillis();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], ca = args[1], user = args[2], password = args[3];
        String allowed = args[4], denied = args[5];
        int count = Integer.parseInt(args[6]);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        common.put("security.protocol", "SASL_SSL");
        common.put("sasl.mechanism", "SCRAM-SHA-256");
        common.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required"
                + " username=\"" + user + "\" password=\"" + password + "\";");
        common.put("ssl.truststore.type", "PEM");
        common.put("ssl.truststore.location", ca);

        Properties producerProps = new Properties();
        producerProps.putAll(common);
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        producerProps.put("max.block.ms", "15000");
        producerProps.put("delivery.timeout.ms", "15000");
        producerProps.put("request.timeout.ms", "10000");
        producerProps.put("linger.ms", "0");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(allowed, 0, null, "java-" + i)).get(15, TimeUnit.SECONDS);
            }
            System.out.println("produced " + count + " at " + (System.currentTimeMillis() - START) + " ms");
            String outcome = "none";
            try {
                producer.send(new ProducerRecord<>(denied, "refused")).get(15, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                outcome = e.getCause().getClass().getName();
            } catch (org.apache.kafka.common.KafkaException e) {
                outcome = e.getClass().getName();
            }
            System.out.println("denied at " + (System.currentTimeMillis() - START) + " ms");
            consume(common, allowed, count);
            System.out.println("denied " + outcome);
        }
    }

    private static void consume(Properties common, String topic, int count) {
        Properties props = new Properties();
        props.putAll(common);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        TopicPartition partition = new TopicPartition(topic, 0);
        int read = 0;
        long deadline = System.currentTimeMillis() + 15000;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            while (read < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    if (record.value().equals("java-" + read)) {
                        read++;
                    }
                }
            }
        }
        System.out.println("consumed " + read);
        System.out.println("consumed at " + (System.currentTimeMillis() - START) + " ms");
    }
}
