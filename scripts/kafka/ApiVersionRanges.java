// The request versions each Kafka release accepts, read from its own kafka-clients jar
// (ApiMessageType: every API's lowest and highest version): the source of
// kdissect/protocol/removed_versions.py. Run by scripts/kafka/removed_versions.py, which
// fetches the jars; never by hand.
//   java ApiVersionRanges.java RELEASE=JAR...
// prints one JSON line per release: {"release": "4.0.0", "apis": [[key, "Name", lo, hi]...]}
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;

public class ApiVersionRanges {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            int eq = arg.indexOf('=');
            String release = arg.substring(0, eq);
            URL jar = Path.of(arg.substring(eq + 1)).toUri().toURL();
            // each release in its own loader, apart from the others and from this class's
            try (URLClassLoader loader = new URLClassLoader(new URL[]{jar},
                    ClassLoader.getPlatformClassLoader())) {
                Class<?> type = Class.forName("org.apache.kafka.common.message.ApiMessageType",
                                              true, loader);
                Method key = type.getMethod("apiKey");
                Method lowest = type.getMethod("lowestSupportedVersion");
                // the highest version, the unstable last one included (as the broker's
                // unstable.api.versions.enable would)
                Method highest = type.getMethod("highestSupportedVersion", boolean.class);
                StringBuilder out = new StringBuilder("{\"release\": \"" + release + "\", \"apis\": [");
                Object[] apis = type.getEnumConstants();
                for (int i = 0; i < apis.length; i++) {
                    Object api = apis[i];
                    out.append(i == 0 ? "" : ", ").append("[").append(key.invoke(api))
                       .append(", \"").append(((Enum<?>) api).name()).append("\", ")
                       .append(lowest.invoke(api)).append(", ")
                       .append(highest.invoke(api, true)).append("]");
                }
                System.out.println(out.append("]}"));
            }
        }
    }
}
