// Sessions of the Java clients of the pinned Kafka release (kafka-clients, kafka-streams),
// run as a single source file on the fetched classpath:
//   java -cp 'LIBS/*' KafkaScenarios.java MODE BOOTSTRAP
// MODE: consumer-group (KIP-848, group.protocol=consumer), share-group (KIP-932),
// streams-group (KIP-1071, group.protocol=streams), transactions (plus an idempotent
// producer), admin (configs, ACLs, quotas, partition reassignment). Each prints what it
// read, one line per record, so the test can check nothing was lost. With
// -Dkd.truststore=CA.pem every client speaks TLS, trusting that CA.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

public class KafkaScenarios {
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[1];
        switch (args[0]) {
            case "consumer-group": consumerGroup(); break;
            case "share-group": shareGroup(); break;
            case "streams-group": streamsGroup(); break;
            case "transactions": transactions(); break;
            case "admin": admin(); break;
            default: throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static Properties props(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        String ca = System.getProperty("kd.truststore");   // over TLS, trusting this PEM CA
        if (ca != null) {
            p.put("security.protocol", "SSL");
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", ca);
        }
        return p;
    }

    static void createTopics(String... names) throws Exception {
        try (Admin admin = Admin.create(props("kd-admin-setup"))) {
            List<NewTopic> topics = new ArrayList<>();
            for (String n : names) topics.add(new NewTopic(n, 1, (short) 1));
            admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
        }
    }

    static void produce(String topic, int n, String prefix, Properties extra) throws Exception {
        Properties p = props("kd-producer");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.putAll(extra);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) producer.send(new ProducerRecord<>(topic, "k" + i, prefix + i)).get();
        }
    }

    static Properties consumerProps(String clientId, String group) {
        Properties p = props(clientId);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return p;
    }

    static void consumerGroup() throws Exception {
        createTopics("kip848");
        produce("kip848", 5, "c", new Properties());
        Properties p = consumerProps("kd-kip848", "kd-kip848-group");
        p.put("group.protocol", "consumer");          // ConsumerGroupHeartbeat, not JoinGroup
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of("kip848"));
            int got = 0;
            long deadline = System.currentTimeMillis() + 60000;
            while (got < 5 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println(r.value());
                    got++;
                }
            c.commitSync();
        }
    }

    static void shareGroup() throws Exception {
        createTopics("share");
        try (Admin admin = Admin.create(props("kd-admin-setup"))) {
            // share groups start at the latest offset unless told otherwise
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, "kd-share-group");
            admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                 .all().get(30, TimeUnit.SECONDS);
        }
        produce("share", 5, "s", new Properties());
        Properties p = consumerProps("kd-share", "kd-share-group");
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of("share"));
            int got = 0;
            long deadline = System.currentTimeMillis() + 60000;
            while (got < 5 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println(r.value());   // acknowledged implicitly by the next poll
                    got++;
                }
            c.commitSync();
        }
    }

    static void streamsGroup() throws Exception {
        createTopics("streams-in", "streams-out");
        produce("streams-in", 5, "t", new Properties());
        Properties p = props("kd-streams");
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, "kd-streams-app");
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");   // StreamsGroupHeartbeat
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kd-streams-" + System.nanoTime());
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream("streams-in").mapValues(v -> v.toUpperCase()).to("streams-out");
        try (KafkaStreams streams = new KafkaStreams(b.build(), p)) {
            streams.start();
            Properties cp = consumerProps("kd-streams-reader", "kd-streams-reader");
            cp.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of("streams-out"));
                int got = 0;
                long deadline = System.currentTimeMillis() + 90000;
                while (got < 5 && System.currentTimeMillis() < deadline)
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                        System.out.println(r.value());
                        got++;
                    }
            }
            streams.close(Duration.ofSeconds(20));
        }
    }

    static void transactions() throws Exception {
        createTopics("txn", "idempotent");
        Properties idem = new Properties();
        idem.put("enable.idempotence", "true");
        idem.put("acks", "all");
        produce("idempotent", 5, "i", idem);
        Properties p = props("kd-txn");
        p.put("transactional.id", "kd-txn-id");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>("txn", "k" + i, "committed" + i));
            // offsets committed with the transaction (AddOffsetsToTxn, TxnOffsetCommit: v6 names
            // topics by id from Kafka 4.4) for a group with no members
            producer.sendOffsetsToTransaction(Map.of(new TopicPartition("txn", 0), new OffsetAndMetadata(3)),
                                              new ConsumerGroupMetadata("kd-txn-offsets"));
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 2; i++) producer.send(new ProducerRecord<>("txn", "k" + i, "aborted" + i));
            producer.flush();
            producer.abortTransaction();
        }
        Properties cp = consumerProps("kd-txn-reader", "kd-txn-reader");
        cp.put("isolation.level", "read_committed");
        cp.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of("txn"));
            int got = 0;
            long deadline = System.currentTimeMillis() + 30000;
            while (got < 3 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println(r.value());
                    got++;
                }
        }
        try (Admin admin = Admin.create(props("kd-txn-admin"))) {       // DeleteGroups (v3 in 4.4)
            admin.deleteConsumerGroups(List.of("kd-txn-offsets")).all().get(30, TimeUnit.SECONDS);
        }
    }

    static void admin() throws Exception {
        try (Admin admin = Admin.create(props("kd-admin"))) {
            admin.createTopics(List.of(new NewTopic("admin-topic", 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, "admin-topic");
            admin.incrementalAlterConfigs(Map.of(topic, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET)))).all().get();
            for (ConfigEntry e : admin.describeConfigs(List.of(topic)).all().get().get(topic).entries())
                if (e.name().equals("retention.ms")) System.out.println("retention.ms=" + e.value());
            AclBinding acl = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "admin-topic", PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            admin.createAcls(List.of(acl)).all().get();
            System.out.println("acls=" + admin.describeAcls(AclBindingFilter.ANY).values().get().size());
            admin.deleteAcls(List.of(acl.toFilter())).all().get();
            ClientQuotaEntity user = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, "alice"));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(user, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all().get();
            System.out.println("quotas=" + admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get());
            int broker = admin.describeCluster().nodes().get().iterator().next().id();
            TopicPartition tp = new TopicPartition("admin-topic", 0);
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(broker)))))
                 .all().get();
            System.out.println("reassigning=" + admin.listPartitionReassignments().reassignments().get().size());
            admin.deleteTopics(List.of("admin-topic")).all().get();
        }
    }
}
