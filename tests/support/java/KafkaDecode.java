// The oracle of the findings tests: Kafka messages decoded by Kafka's own classes
// (AbstractRequest/AbstractResponse parsing, JSON by the generated converters through the
// broker's RequestConvertToJson), one per input line:
//   INDEX req HEX                       a request: header and body (no size prefix)
//   INDEX resp API_KEY VERSION HEX      a response: header and body (no size prefix)
// Prints Kafka's error table first ({"errors": {CODE: NAME}}), then one JSON line per input:
// {"i": INDEX, "body": {...}, "unread": BYTES after what Kafka read} or {"i": INDEX,
// "error": "..."}; a request's also with "api_key", "api_version" and "client_id" from its
// header and "supported": whether this Kafka's ApiKeys still accept that version. A Produce
// request's partitions (topicData[].partitionData[]) and a Fetch response's
// (responses[].partitions[]) also get "_batches": each whole record batch's header as
// Kafka's MemoryRecords reads it (the records' JSON gives only their size).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.record.internal.BaseRecords;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.requests.FetchResponse;
import org.apache.kafka.common.requests.ProduceRequest;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Errors;
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
        ObjectNode errors = json.createObjectNode();      // Kafka's error table, first
        for (Errors e : Errors.values()) errors.put(Short.toString(e.code()), e.name());
        out.append(json.writeValueAsString(json.createObjectNode().set("errors", errors))).append('\n');
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
                    row.put("client_id", header.clientId());
                    AbstractRequest req = AbstractRequest.parseRequest(header.apiKey(),
                        header.apiVersion(), new ByteBufferAccessor(buf)).request;
                    JsonNode body = RequestConvertToJson.request(req);
                    if (req instanceof ProduceRequest produce) {
                        int t = 0;
                        for (ProduceRequestData.TopicProduceData td : produce.data().topicData()) {
                            int p = 0;
                            for (ProduceRequestData.PartitionProduceData pd : td.partitionData())
                                batches(body.get("topicData").get(t).get("partitionData").get(p++),
                                        pd.records());
                            t++;
                        }
                    }
                    row.set("body", body);
                    row.put("unread", buf.remaining());     // bytes after what Kafka read
                } else {
                    ApiKeys key = ApiKeys.forId(Integer.parseInt(f[2]));
                    short version = Short.parseShort(f[3]);
                    ByteBuffer buf = ByteBuffer.wrap(HexFormat.of().parseHex(f[4]));
                    ResponseHeader.parse(buf, key.responseHeaderVersion(version));
                    AbstractResponse resp = AbstractResponse.parseResponse(key,
                        new ByteBufferAccessor(buf), version);
                    JsonNode body = RequestConvertToJson.response(resp, version);
                    if (resp instanceof FetchResponse fetch) {
                        int t = 0;
                        for (FetchResponseData.FetchableTopicResponse tr : fetch.data().responses()) {
                            int p = 0;
                            for (FetchResponseData.PartitionData pd : tr.partitions())
                                batches(body.get("responses").get(t).get("partitions").get(p++),
                                        pd.records());
                            t++;
                        }
                    }
                    row.set("body", body);
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

    // The whole batches of a records field (a partial batch at the end, as a Fetch may
    // return, is not one: MemoryRecords stops before it), their headers as Kafka reads them.
    static void batches(JsonNode partition, BaseRecords records) {
        ArrayNode out = ((ObjectNode) partition).putArray("_batches");
        if (!(records instanceof MemoryRecords memory)) return;
        for (RecordBatch b : memory.batches()) {
            ObjectNode o = out.addObject();
            o.put("magic", b.magic());
            o.put("baseOffset", b.baseOffset());
            o.put("lastOffset", b.lastOffset());
            o.put("producerId", b.producerId());
            o.put("producerEpoch", b.producerEpoch());
            o.put("baseSequence", b.baseSequence());
            o.put("lastSequence", b.lastSequence());
            Integer count = b.countOrNull();
            if (count != null) o.put("count", count);
            o.put("transactional", b.isTransactional());
            o.put("control", b.isControlBatch());
            o.put("maxTimestamp", b.maxTimestamp());
            o.put("timestampType", b.timestampType().name);
        }
    }
}
