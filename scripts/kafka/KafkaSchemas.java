// Kafka's own definitions, read from the runtime Schema objects of the jars on the classpath:
// the oracle for kdissect's tables and the source of its internal-record layouts. Run by
// scripts/kafka/schemas (which fetches the jars and compiles this file); never by hand.
//   KafkaSchemas schemas          one JSON line per API key/version/direction (kafka-clients)
//   KafkaSchemas samples SEEDS    messages with non-default values in every field
//   KafkaSchemas errors           one JSON line per error code (Errors: code, name, retriable)
//   KafkaSchemas internal JAR...  the layouts of internal-topic and KRaft control records found
//                                 in JAR..., as kdissect/protocol/internal_schemas.py
//   KafkaSchemas internal-samples SEEDS JAR...   such records written by their generated classes
// A sample is built as a protocol Struct with random values in every field (tagged fields
// included), written by Kafka's Schema, read and written again by the generated *Data class
// (its own serializer, ObjectSerializationCache), and read back as a Struct: the line carries
// those bytes and the values Kafka reads from them.
import java.nio.ByteBuffer;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

public class KafkaSchemas {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("internal")) {
            internal(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args[0].equals("internal-samples")) {
            internalSamples(Integer.parseInt(args[1]), Arrays.copyOfRange(args, 2, args.length));
            return;
        }
        if (args[0].equals("errors")) {
            StringBuilder out = new StringBuilder();
            for (org.apache.kafka.common.protocol.Errors e : org.apache.kafka.common.protocol.Errors.values())
                out.append("{\"code\":").append(e.code()).append(",\"name\":").append(str(e.name()))
                   .append(",\"retriable\":")
                   .append(e.exception() instanceof org.apache.kafka.common.errors.RetriableException)
                   .append("}\n");
            System.out.print(out);
            return;
        }
        boolean samples = args[0].equals("samples");
        int seeds = samples ? Integer.parseInt(args[1]) : 0;
        StringBuilder out = new StringBuilder();
        for (ApiMessageType api : ApiMessageType.values()) {
            for (short v = api.lowestSupportedVersion(); v <= api.highestSupportedVersion(true); v++) {
                for (String dir : new String[] {"request", "response"}) {
                    Schema schema = (dir.equals("request") ? api.requestSchemas() : api.responseSchemas())[v];
                    String head = "{\"key\":" + api.apiKey() + ",\"name\":" + str(api.name) + ",\"version\":" + v
                            + ",\"direction\":\"" + dir + "\"";
                    if (!samples) {
                        out.append(head).append(",\"schema\":").append(schemaJson(schema)).append("}\n");
                        continue;
                    }
                    for (int seed = 0; seed < seeds; seed++) {
                        out.append(head).append(",\"seed\":").append(seed);
                        try {
                            ApiMessage message = dir.equals("request") ? api.newRequest() : api.newResponse();
                            byte[] bytes = sample(message, v, schema,
                                                  new Random(seed * 7919L + api.apiKey() * 131L + v));
                            out.append(",\"hex\":\"").append(hex(bytes)).append("\",\"values\":")
                               .append(valueJson(schema, schema.read(ByteBuffer.wrap(bytes)))).append("}\n");
                        } catch (RuntimeException e) {
                            out.append(",\"error\":").append(str(e.toString())).append("}\n");
                        }
                    }
                }
            }
        }
        System.out.print(out);
    }

    static byte[] sample(ApiMessage message, short v, Schema schema, Random r) {
        Struct struct = (Struct) fill(schema, r);
        ByteBuffer first = ByteBuffer.allocate(schema.sizeOf(struct));
        schema.write(first, struct);
        first.flip();
        message.read(new ByteBufferAccessor(first), v);
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer out = ByteBuffer.allocate(message.size(cache, v));
        message.write(new ByteBufferAccessor(out), cache, v);
        return out.array();
    }

    // --- random values for every field ---------------------------------------------------
    static Object fill(Type t, Random r) {
        if (t instanceof Schema) {
            Schema s = (Schema) t;
            Struct struct = new Struct(s);
            for (BoundField f : s.fields())
                struct.set(f, f.def.type instanceof TaggedFields ? fillTagged((TaggedFields) f.def.type, r)
                                                                 : nullOr(f.def.type, r));
            return struct;
        }
        if (t.isArray()) {
            Type elem = t.arrayElementType().get();
            Object[] items = new Object[1 + r.nextInt(2)];
            for (int i = 0; i < items.length; i++) items[i] = fill(elem, r);
            return items;
        }
        String name = t.toString();
        if (name.endsWith("RECORDS"))    // empty records, read by Kafka itself (the class moved in 4.x)
            return t.read(ByteBuffer.wrap(name.startsWith("COMPACT") ? new byte[] {1} : new byte[4]));
        if (name.endsWith("STRING")) return word(r);
        if (name.endsWith("BYTES")) { byte[] b = new byte[1 + r.nextInt(6)]; r.nextBytes(b); return ByteBuffer.wrap(b); }
        switch (name) {
            case "BOOLEAN": return true;
            case "INT8": return (byte) (1 + r.nextInt(120));
            case "INT16": return (short) (1 + r.nextInt(30000));
            case "UINT16": return 1 + r.nextInt(65000);
            case "INT32": case "VARINT": return 1 + r.nextInt(Integer.MAX_VALUE - 1);
            case "UINT32": return 1L + r.nextInt(Integer.MAX_VALUE - 1);
            case "UNSIGNED_VARINT": return 1 + r.nextInt(1 << 20);
            case "INT64": case "VARLONG": return 1L + (r.nextLong() >>> 2);
            case "FLOAT64": return r.nextDouble() * 1e6 + 0.5;
            case "UUID": return new Uuid(r.nextLong() | 1, r.nextLong() | 1);
            default: throw new IllegalStateException("no sample value for type " + name);
        }
    }

    static Object nullOr(Type t, Random r) {
        return t.isNullable() && r.nextInt(5) == 0 ? null : fill(t, r);
    }

    static NavigableMap<Integer, Object> fillTagged(TaggedFields t, Random r) {
        NavigableMap<Integer, Object> m = new TreeMap<>();
        for (Map.Entry<Integer, Field> e : tagged(t).entrySet()) m.put(e.getKey(), fill(e.getValue().type, r));
        return m;
    }

    // TaggedFields.fields() is public from 4.0 on; 3.9 keeps the map private
    @SuppressWarnings("unchecked")
    static Map<Integer, Field> tagged(TaggedFields t) {
        try {
            java.lang.reflect.Field f = TaggedFields.class.getDeclaredField("fields");
            f.setAccessible(true);
            return (Map<Integer, Field>) f.get(t);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static String word(Random r) {
        String alphabet = "abcxyz-_.\u00e9\u20ac0123";
        StringBuilder b = new StringBuilder();
        for (int i = 1 + r.nextInt(10); i > 0; i--) b.append(alphabet.charAt(r.nextInt(alphabet.length())));
        return b.toString();
    }

    // --- JSON ----------------------------------------------------------------------------
    static String schemaJson(Schema s) {
        List<String> fields = new ArrayList<>();
        for (BoundField f : s.fields()) {
            if (f.def.type instanceof TaggedFields) {
                for (Map.Entry<Integer, Field> e : tagged((TaggedFields) f.def.type).entrySet())
                    fields.add(fieldJson(e.getValue(), e.getKey()));
                fields.add("{\"name\":\"_tagged_fields\",\"type\":\"TAGGED_FIELDS\"}");
            } else {
                fields.add(fieldJson(f.def, null));
            }
        }
        return "{\"fields\":[" + String.join(",", fields) + "]}";
    }

    static String fieldJson(Field f, Integer tag) {
        return "{\"name\":" + str(f.name) + (tag == null ? "" : ",\"tag\":" + tag) + "," + typeJson(f.type).substring(1);
    }

    static String typeJson(Type t) {
        if (t instanceof Schema)
            return "{\"type\":\"STRUCT\",\"nullable\":" + t.isNullable() + ",\"struct\":" + schemaJson((Schema) t) + "}";
        if (t.isArray())
            return "{\"type\":\"" + (t.toString().startsWith("COMPACT") || t.getClass().getSimpleName().startsWith("Compact")
                    ? "COMPACT_ARRAY" : "ARRAY") + "\",\"nullable\":" + t.isNullable()
                    + ",\"element\":" + typeJson(t.arrayElementType().get()) + "}";
        return "{\"type\":" + str(t.toString()) + ",\"nullable\":" + t.isNullable() + "}";
    }

    static String valueJson(Type t, Object v) {
        if (v == null) return "null";
        if (t instanceof Schema) {
            Struct s = (Struct) v;
            List<String> parts = new ArrayList<>();
            for (BoundField f : ((Schema) t).fields()) {
                if (f.def.type instanceof TaggedFields) {
                    Map<Integer, Field> defs = tagged((TaggedFields) f.def.type);
                    @SuppressWarnings("unchecked")
                    Map<Integer, Object> present = (Map<Integer, Object>) s.get(f);
                    for (Map.Entry<Integer, Object> e : present.entrySet()) {
                        Field d = defs.get(e.getKey());
                        parts.add(str(d.name) + ":" + valueJson(d.type, e.getValue()));
                    }
                } else {
                    parts.add(str(f.def.name) + ":" + valueJson(f.def.type, s.get(f)));
                }
            }
            return "{" + String.join(",", parts) + "}";
        }
        if (t.isArray()) {
            List<String> items = new ArrayList<>();
            for (Object o : (Object[]) v) items.add(valueJson(t.arrayElementType().get(), o));
            return "[" + String.join(",", items) + "]";
        }
        if (v instanceof String) return str((String) v);
        if (v instanceof ByteBuffer) {
            ByteBuffer b = ((ByteBuffer) v).duplicate();
            byte[] a = new byte[b.remaining()];
            b.get(a);
            return "{\"$bytes\":\"" + hex(a) + "\"}";
        }
        if (v.getClass().getSimpleName().endsWith("Records")) return "{\"$bytes\":\"\"}";
        if (v instanceof Uuid) {
            Uuid u = (Uuid) v;
            return str(new java.util.UUID(u.getMostSignificantBits(), u.getLeastSignificantBits()).toString());
        }
        return v.toString();   // numbers and booleans
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String hex(byte[] a) {
        StringBuilder b = new StringBuilder();
        for (byte x : a) b.append(String.format("%02x", x));
        return b.toString();
    }

    // --- internal-topic records (kdissect/protocol/internal_schemas.py) --------------------
    // package prefix -> kdissect's name of the family (see kdissect/protocol/internal.py)
    static final String[][] FAMILIES = {
        {"org.apache.kafka.common.metadata.", "metadata"},
        {"org.apache.kafka.coordinator.group.generated.", "group"},
        {"org.apache.kafka.coordinator.transaction.generated.", "transaction"},
        {"org.apache.kafka.coordinator.share.generated.", "share"},
        {"org.apache.kafka.server.log.remote.metadata.storage.generated.", "remote"},
    };
    // KRaft control records live among the client messages
    static final Set<String> CONTROL = new HashSet<>(Arrays.asList(
        "LeaderChangeMessage", "SnapshotHeaderRecord", "SnapshotFooterRecord",
        "KRaftVersionRecord", "VotersRecord"));
    static final Map<Object, String> TYPE_NAMES = new IdentityHashMap<>();

    // simple name -> (family, class) of every internal record class in the jars, by class name
    static Map<String, Object[]> internalClasses(String[] jars) throws Exception {
        Map<String, Object[]> found = new java.util.LinkedHashMap<>();   // in class-name order
        TreeSet<String> classes = new TreeSet<>();
        for (String jar : jars) {
            try (JarFile jf = new JarFile(jar)) {
                for (JarEntry e : Collections.list(jf.entries())) {
                    String n = e.getName();
                    if (!n.endsWith(".class") || n.contains("$") || n.endsWith("JsonConverter.class")
                        || n.endsWith("JsonConverters.class")) continue;
                    classes.add(n.substring(0, n.length() - 6).replace('/', '.'));
                }
            }
        }
        for (String cn : classes) {
            String family = null;
            for (String[] fam : FAMILIES) if (cn.startsWith(fam[0])) family = fam[1];
            String simple = cn.substring(cn.lastIndexOf('.') + 1);
            if (family == null && cn.startsWith("org.apache.kafka.common.message.") && CONTROL.contains(simple))
                family = "control";
            if (family == null) continue;
            Class<?> c = Class.forName(cn);
            if (!ApiMessage.class.isAssignableFrom(c)) continue;
            try { c.getField("SCHEMAS"); } catch (NoSuchFieldException ex) { continue; }
            found.put(simple, new Object[]{family, c});
        }
        return found;
    }

    static void internal(String[] jars) throws Exception {
        for (java.lang.reflect.Field f : Type.class.getFields()) {
            if (Modifier.isStatic(f.getModifiers()) && Type.class.isAssignableFrom(f.getType()))
                TYPE_NAMES.put(f.get(null), f.getName().equals("UNSIGNED_INT32") ? "UINT32" : f.getName());
        }
        TreeMap<String, String[]> index = new TreeMap<>();
        StringBuilder bnf = new StringBuilder();
        for (Map.Entry<String, Object[]> found : internalClasses(jars).entrySet()) {
            String simple = found.getKey(), family = (String) found.getValue()[0];
            Class<?> c = (Class<?>) found.getValue()[1];
            Schema[] schemas = (Schema[]) c.getField("SCHEMAS").get(null);
            ApiMessage m = (ApiMessage) c.getConstructor().newInstance();
            short lo = m.lowestSupportedVersion(), hi = m.highestSupportedVersion();
            index.put(simple, new String[]{family, Short.toString(m.apiKey()), Short.toString(lo), Short.toString(hi)});
            for (int v = lo; v <= hi; v++) {
                bnf.append(simple).append(" Record (Version: ").append(v).append(") =>");
                bnfStruct(bnf, schemas[v], 0);
                bnf.append('\n');
            }
        }
        StringBuilder out = new StringBuilder();
        out.append("# Generated by scripts/dump_internal_schemas.py from Apache Kafka ").append(System.getProperty("kafka.version", "?"))
           .append("'s jars: DO NOT EDIT.\n");
        out.append("\"\"\"The layouts of Kafka's internal-topic and KRaft control records, read from the runtime\n")
           .append("Schema objects of the generated classes in Apache Kafka's jars (kafka-metadata,\n")
           .append("kafka-group-coordinator, kafka-transaction-coordinator, kafka-share-coordinator,\n")
           .append("kafka-storage, kafka-clients). ``MESSAGES``: name -> (family, api key, lowest and\n")
           .append("highest version); ``BNF``: every version in the protocol guide's notation (grammar.py).\"\"\"\n\n");
        out.append("MESSAGES: dict[str, tuple[str, int, int, int]] = {\n");
        for (Map.Entry<String, String[]> e : index.entrySet()) {
            String[] v = e.getValue();
            out.append("    \"").append(e.getKey()).append("\": (\"").append(v[0]).append("\", ")
               .append(v[1]).append(", ").append(v[2]).append(", ").append(v[3]).append("),\n");
        }
        out.append("}\n\nBNF = \"\"\"\n").append(bnf).append("\"\"\"\n");
        System.out.print(out);
    }

    // every version of every internal record, written as the API samples are: a Struct with
    // random values, read and written again by the generated class
    static void internalSamples(int seeds, String[] jars) throws Exception {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, Object[]> found : internalClasses(jars).entrySet()) {
            Class<?> c = (Class<?>) found.getValue()[1];
            Schema[] schemas = (Schema[]) c.getField("SCHEMAS").get(null);
            ApiMessage m = (ApiMessage) c.getConstructor().newInstance();
            for (short v = m.lowestSupportedVersion(); v <= m.highestSupportedVersion(); v++) {
                for (int seed = 0; seed < seeds; seed++) {
                    out.append("{\"name\":").append(str(found.getKey())).append(",\"family\":")
                       .append(str((String) found.getValue()[0])).append(",\"type\":").append(m.apiKey())
                       .append(",\"version\":").append(v).append(",\"seed\":").append(seed);
                    try {
                        ApiMessage fresh = (ApiMessage) c.getConstructor().newInstance();
                        byte[] bytes = sample(fresh, v, schemas[v],
                                              new Random(seed * 7919L + found.getKey().hashCode() * 131L + v));
                        out.append(",\"hex\":\"").append(hex(bytes)).append("\",\"values\":")
                           .append(valueJson(schemas[v], schemas[v].read(ByteBuffer.wrap(bytes)))).append("}\n");
                    } catch (RuntimeException e) {
                        out.append(",\"error\":").append(str(e.toString())).append("}\n");
                    }
                }
            }
        }
        System.out.print(out);
    }

    // the items of a struct on the current line, then its fields' rules indented below
    static void bnfStruct(StringBuilder sb, Schema s, int depth) {
        List<String> rules = new ArrayList<>();
        List<Object> nested = new ArrayList<>();      // a Schema, or a type's name
        for (BoundField bf : s.fields()) {
            Type t = bf.def.type;
            if (t instanceof TaggedFields) {
                sb.append(" TAG_BUFFER");
                for (Map.Entry<Integer, Field> e : tagged((TaggedFields) t).entrySet())
                    bnfItem(sb, e.getValue().name, e.getValue().type, e.getKey(), rules, nested);
                continue;
            }
            bnfItem(sb, bf.def.name, t, null, rules, nested);
        }
        String pad = "  ".repeat(depth + 1);
        for (int i = 0; i < rules.size(); i++) {
            sb.append('\n').append(pad).append(rules.get(i)).append(" =>");
            Object n = nested.get(i);
            if (n instanceof Schema) bnfStruct(sb, (Schema) n, depth + 1);
            else sb.append(' ').append(n);
        }
    }

    static void bnfItem(StringBuilder sb, String name, Type t, Integer tag, List<String> rules, List<Object> nested) {
        String prefix = "", open = "", close = "";
        if (t.isArray()) {
            open = "["; close = "]";
            t = t.arrayElementType().get();
        }
        if (t.getClass().getSimpleName().equals("NullableSchema")) prefix = "?";   // 4.0+
        sb.append(' ').append(open).append(prefix).append(name).append(close);
        if (tag != null) sb.append('@').append(tag);
        rules.add(name);
        if (t instanceof Schema) nested.add(t);
        else {
            String tn = TYPE_NAMES.get(t);
            if (tn == null) throw new IllegalStateException("unknown type " + t + " of " + name);
            nested.add(tn);
        }
    }
}
