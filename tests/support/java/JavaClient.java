// The Java client (kafka-clients) for the proxy tests, run as a single source file:
//   java -cp JARS JavaClient.java produce BOOTSTRAP TOPIC COUNT
//   java -cp JARS JavaClient.java consume BOOTSTRAP TOPIC COUNT   (prints the values)
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaClient {
    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        int count = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "java-through-proxy");
        if (mode.equals("produce")) {
            p.put("compression.type", "lz4");
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, "java " + i)).get();
                }
            }
            return;
        }
        p.put("group.id", "java-through-proxy");
        p.put("auto.offset.reset", "earliest");
        p.put("session.timeout.ms", "6000");        // the test broker holds joins that long
        p.put("heartbeat.interval.ms", "2000");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int got = 0;
        long deadline = System.currentTimeMillis() + 60_000;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println(r.value());
                    got++;
                }
            }
            consumer.commitSync();
        }
    }
}
