// Every kind of credential Kafka's admin APIs carry, sent by the Java client of the
// pinned release to BOOTSTRAP (a SASL_PLAINTEXT listener, as admin/admin-secret):
//   java -cp 'LIBS/*' SecretScenarios BOOTSTRAP
// SCRAM credentials (AlterUserScramCredentials: the salted password; the broker keeps
// stored and server keys in __cluster_metadata), config passwords (IncrementalAlterConfigs,
// CreateTopics, validate-only so the broker keeps running as it was), DescribeConfigs (the
// broker's own JAAS config, which it calls sensitive), delegation tokens (create, describe,
// renew, expire: HMACs both ways). Prints each secret it made as "name=value" (HMACs in
// base64), so the test can look for them in every output.
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.security.token.delegation.DelegationToken;

public class SecretScenarios {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.id", "kd-secrets");
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "username=\"admin\" password=\"admin-secret\";");
        try (Admin admin = Admin.create(p)) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("carol",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "CarolScramPw-6620")))
                 .all().get(30, TimeUnit.SECONDS);
            System.out.println("scram=CarolScramPw-6620");
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
            String jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required user_dave=\"JaasDavePw-3317\";";
            try {
                admin.incrementalAlterConfigs(Map.of(broker, List.of(
                        new AlterConfigOp(new ConfigEntry("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas),
                                          AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("ssl.keystore.password", "KeystorePw-8842"),
                                          AlterConfigOp.OpType.SET))),
                        new AlterConfigsOptions().validateOnly(true)).all().get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.out.println("# incrementalAlterConfigs: " + e.getMessage());
            }
            System.out.println("jaas=JaasDavePw-3317");
            System.out.println("keystore=KeystorePw-8842");
            try {
                admin.createTopics(List.of(new NewTopic("secret-topic", 1, (short) 1).configs(
                        Map.of("ssl.truststore.password", "TruststorePw-2291"))),
                        new CreateTopicsOptions().validateOnly(true)).all().get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.out.println("# createTopics: " + e.getMessage());
            }
            System.out.println("truststore=TruststorePw-2291");
            admin.describeConfigs(List.of(broker)).all().get(30, TimeUnit.SECONDS);
            DelegationToken token = admin.createDelegationToken().delegationToken().get(30, TimeUnit.SECONDS);
            System.out.println("hmac=" + token.hmacAsBase64String());
            // the token reaches the broker's metadata cache a moment after it is made
            for (int i = 0; ; i++) {
                try {
                    admin.renewDelegationToken(token.hmac()).expiryTimestamp().get(30, TimeUnit.SECONDS);
                    break;
                } catch (java.util.concurrent.ExecutionException e) {
                    if (i == 100) throw e;
                    Thread.sleep(100);
                }
            }
            admin.describeDelegationToken().delegationTokens().get(30, TimeUnit.SECONDS);
            admin.expireDelegationToken(token.hmac()).expiryTimestamp().get(30, TimeUnit.SECONDS);
        }
    }
}
