// The oracle of the findings tests: Kafka messages decoded by Kafka's own classes
// (AbstractRequest/AbstractResponse parsing, JSON by the generated converters through the
// broker's RequestConvertToJson), one per input line:
//   INDEX req HEX                       a request: header and body (no size prefix)
//   INDEX resp API_KEY VERSION HEX      a response: header and body (no size prefix)
// Prints one JSON line per input: {"i": INDEX, "body": {...}, "unread": BYTES after what
// Kafka read} or {"i": INDEX, "error": "..."}; a request's also with "api_key" and "api_version" from its header and
// "supported": whether this Kafka's ApiKeys still accept that version.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.network.RequestConvertToJson;

public class KafkaDecode {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f.length < 3) continue;
            ObjectNode row = json.createObjectNode();
            row.put("i", Long.parseLong(f[0]));
            try {
                if (f[1].equals("req")) {
                    ByteBuffer buf = ByteBuffer.wrap(HexFormat.of().parseHex(f[2]));
                    // the header's first fields, as every version has them (also for the
                    // versions Kafka 4 removed, which it no longer parses)
                    if (buf.remaining() >= 4) {
                        short k = buf.getShort(0), v = buf.getShort(2);
                        row.put("api_key", k);
                        row.put("api_version", v);
                        row.put("supported", ApiKeys.hasId(k) && ApiKeys.forId(k).isVersionSupported(v));
                    }
                    RequestHeader header = RequestHeader.parse(buf);
                    AbstractRequest req = AbstractRequest.parseRequest(header.apiKey(),
                        header.apiVersion(), new ByteBufferAccessor(buf)).request;
                    row.set("body", RequestConvertToJson.request(req));
                    row.put("unread", buf.remaining());     // bytes after what Kafka read
                } else {
                    ApiKeys key = ApiKeys.forId(Integer.parseInt(f[2]));
                    short version = Short.parseShort(f[3]);
                    ByteBuffer buf = ByteBuffer.wrap(HexFormat.of().parseHex(f[4]));
                    ResponseHeader.parse(buf, key.responseHeaderVersion(version));
                    AbstractResponse resp = AbstractResponse.parseResponse(key,
                        new ByteBufferAccessor(buf), version);
                    row.set("body", RequestConvertToJson.response(resp, version));
                    row.put("unread", buf.remaining());
                }
            } catch (Exception e) {
                row.put("error", e.toString());
            }
            out.append(json.writeValueAsString(row)).append('\n');
            if (out.length() > 1 << 16) {
                System.out.print(out);
                out.setLength(0);
            }
        }
        System.out.print(out);
        System.out.flush();
    }
}
