// Interop driver for the Apache Kafka Java client (kafka-clients 4.x).
//
// Used by tests/interop/test_java_clients.py. Built by scripts/test with plain javac:
//   javac -cp 'compat/java/lib/*' -d compat/java/target compat/java/src/InteropClient.java
// Run:
//   java -cp 'compat/java/target:compat/java/lib/*' InteropClient <command> [--option value]...
//
// Commands
//   create-topic      --bootstrap B --topic T --partitions P
//                     (create-topic, produce, consume and group-consume take --prop k=v...:
//                     client properties, e.g. security.protocol=SSL and the ssl.* of mTLS)
//   produce           --bootstrap B --topic T --count N [--partitions P] [--compression C]
//                     [--acks A] [--base-ts MS] [--start I] [--linger-ms L] [--batch-size S]
//                     Producer config is the client default apart from the options given
//                     (idempotence stays ON, as in every stock kafka-clients >= 3).
//   consume           --bootstrap B --topic T --count N [--group G] [--partition P --offset O]
//                     [--timeout-ms MS]
//                     Prints one JSON line per record, then exits once N records were read.
//   offsets-for-times --bootstrap B --topic T --query P:TS[,P:TS...]
//                     Prints one JSON line per query: {"p":..,"ts":..,"offset":..,"rts":..}
//   list-offsets      --bootstrap B --topic T --spec earliest|latest|max-timestamp|TS
//                     Uses the Admin API; one JSON line per partition.
//   log-dirs          --bootstrap B --topic T [--move-to DIR]
//                     Admin describeLogDirs of every broker: one JSON line per replica of T
//                     {"b":BROKER,"dir":..,"p":..,"size":..,"lag":..,"total":..,"usable":..};
//                     with --move-to, alterReplicaLogDirs of each of them to DIR, one line
//                     {"b":..,"p":..,"moved":"ok"|"<exception class>"} each.
//   group-consume     --bootstrap B --topic T --group G [--strategy range,roundrobin,...]
//                     [--session-ms MS] [--heartbeat-ms MS] [--instance-id ID] [--batch N]
//                     [--rate R] [--stop-file F] [--max-seconds S] [--prop k=v]...
//                     A subscribed group member (classic protocol unless --prop says otherwise)
//                     for tests/interop/test_group_*.py. One JSON line per event on stdout:
//                       {"e":"a"|"r"|"l","g":GEN,"p":[partitions],"t":MS}  rebalance listener
//                                       (assigned / revoked / lost, exactly as the client
//                                       passes them: deltas under cooperative protocols)
//                       {"e":"m","p":P,"o":OFFSET,"v":"<value>","g":GEN,"t":MS}  per record
//                       {"e":"c","g":GEN,"t":MS} / {"e":"cf",...,"err":".."}  commitSync ok /
//                                       failed (after each poll batch, records flushed first)
//                       {"e":"closed","t":MS}
//                     --strategy names: range, roundrobin, sticky, cooperative-sticky.
//                     --rate caps records/s (sleep after each batch); stops when the stop
//                     file exists (then closes the consumer) or after --max-seconds.
//
// Record content is a pure function of the record index i (and the base timestamp),
// mirrored in tests/interop/records.py:
//   partition = i % P
//   key       = "key-<i>"                      (UTF-8)
//   value     = "value-<i>-" + "abcdefghij" * (i % 7)
//   headers   = [("idx", "<i>"), ("bin", [i & 0xff, (i >> 8) & 0xff, 0])]
//   timestamp = base + i   (CreateTime)
//
// JSON output: bytes are base64 (standard alphabet), null stays null.

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class InteropClient {

    private static final Base64.Encoder B64 = Base64.getEncoder();

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            usage("missing command");
        }
        String cmd = argv[0];
        Map<String, String> opts = parseOptions(argv);
        int rc;
        switch (cmd) {
            case "create-topic":
                rc = createTopic(opts);
                break;
            case "produce":
                rc = produce(opts);
                break;
            case "consume":
                rc = consume(opts);
                break;
            case "offsets-for-times":
                rc = offsetsForTimes(opts);
                break;
            case "list-offsets":
                rc = listOffsets(opts);
                break;
            case "group-consume":
                rc = groupConsume(opts);
                break;
            case "log-dirs":
                rc = logDirs(opts);
                break;
            default:
                usage("unknown command " + cmd);
                rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    // ------------------------------------------------------------------ records

    static byte[] key(long i) {
        return ("key-" + i).getBytes(StandardCharsets.UTF_8);
    }

    static byte[] value(long i) {
        StringBuilder sb = new StringBuilder("value-").append(i).append('-');
        for (int r = 0; r < (int) (i % 7); r++) {
            sb.append("abcdefghij");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static List<Header> headers(long i) {
        List<Header> hs = new ArrayList<>(2);
        hs.add(new RecordHeader("idx", Long.toString(i).getBytes(StandardCharsets.UTF_8)));
        hs.add(new RecordHeader("bin", new byte[] {(byte) (i & 0xff), (byte) ((i >> 8) & 0xff), 0}));
        return hs;
    }

    // ------------------------------------------------------------------ commands

    /** The client properties given as --prop k=v (repeatable), e.g. security.protocol=SSL. */
    static void putProps(Map<String, String> o, Properties p) {
        if (!o.containsKey("prop")) {
            return;
        }
        for (String kv : o.get("prop").split("\n")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                usage("bad --prop " + kv);
            }
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
    }

    static int createTopic(Map<String, String> o) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        putProps(o, p);
        try (Admin admin = Admin.create(p)) {
            NewTopic nt = new NewTopic(req(o, "topic"), Integer.parseInt(req(o, "partitions")), (short) 1);
            admin.createTopics(Collections.singleton(nt)).all().get(60, TimeUnit.SECONDS);
        }
        System.out.println("{\"created\":" + jstr(req(o, "topic")) + "}");
        return 0;
    }

    static int produce(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long count = Long.parseLong(req(o, "count"));
        long start = Long.parseLong(o.getOrDefault("start", "0"));
        int partitions = Integer.parseInt(o.getOrDefault("partitions", "1"));
        long base = Long.parseLong(o.getOrDefault("base-ts", "0"));

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        putProps(o, p);
        // Only set what the caller asked for: everything else stays the client's default.
        if (o.containsKey("compression")) {
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, o.get("compression"));
        }
        if (o.containsKey("acks")) {
            p.put(ProducerConfig.ACKS_CONFIG, o.get("acks"));
        }
        if (o.containsKey("linger-ms")) {
            p.put(ProducerConfig.LINGER_MS_CONFIG, o.get("linger-ms"));
        }
        if (o.containsKey("batch-size")) {
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, o.get("batch-size"));
        }

        Map<Integer, Long> firstOffset = new HashMap<>();
        Map<Integer, Long> lastOffset = new HashMap<>();
        long acked = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> pending = new ArrayList<>();
            for (long i = start; i < start + count; i++) {
                int part = (int) (i % partitions);
                ProducerRecord<byte[], byte[]> rec =
                    new ProducerRecord<>(topic, part, base + i, key(i), value(i), headers(i));
                pending.add(producer.send(rec));
                if (pending.size() >= 10000) {
                    acked += drain(pending, firstOffset, lastOffset);
                }
            }
            producer.flush();
            acked += drain(pending, firstOffset, lastOffset);
        }
        StringBuilder sb = new StringBuilder("{\"acked\":").append(acked).append(",\"partitions\":{");
        boolean first = true;
        for (Map.Entry<Integer, Long> e : firstOffset.entrySet()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('"').append(e.getKey()).append("\":[").append(e.getValue()).append(',')
                .append(lastOffset.get(e.getKey())).append(']');
        }
        sb.append("}}");
        System.out.println(sb);
        return acked == count ? 0 : 1;
    }

    private static long drain(List<Future<RecordMetadata>> pending, Map<Integer, Long> firstOffset,
                              Map<Integer, Long> lastOffset) throws Exception {
        long n = 0;
        for (Future<RecordMetadata> f : pending) {
            RecordMetadata md = f.get(120, TimeUnit.SECONDS);
            firstOffset.merge(md.partition(), md.offset(), Math::min);
            lastOffset.merge(md.partition(), md.offset(), Math::max);
            n++;
        }
        pending.clear();
        return n;
    }

    static int consume(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long count = Long.parseLong(req(o, "count"));
        long timeoutMs = Long.parseLong(o.getOrDefault("timeout-ms", "60000"));
        String group = o.get("group");

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        putProps(o, p);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        } else {
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        }

        BufferedWriter out = new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        long seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            if (group != null) {
                consumer.subscribe(Collections.singletonList(topic));
            } else {
                List<TopicPartition> tps = new ArrayList<>();
                if (o.containsKey("partition")) {
                    tps.add(new TopicPartition(topic, Integer.parseInt(o.get("partition"))));
                } else {
                    List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
                    for (PartitionInfo pi : infos) {
                        tps.add(new TopicPartition(topic, pi.partition()));
                    }
                }
                consumer.assign(tps);
                if (o.containsKey("offset")) {
                    long off = Long.parseLong(o.get("offset"));
                    for (TopicPartition tp : tps) {
                        consumer.seek(tp, off);
                    }
                } else {
                    consumer.seekToBeginning(tps);
                }
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (seen < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    if (seen >= count) {
                        break;
                    }
                    writeRecord(out, r);
                    seen++;
                }
            }
            if (group != null && seen > 0) {
                consumer.commitSync(Duration.ofSeconds(30));
            }
        }
        out.flush();
        if (seen < count) {
            System.err.println("consume: timed out after " + seen + " of " + count + " records");
            return 3;
        }
        return 0;
    }

    private static void writeRecord(BufferedWriter out, ConsumerRecord<byte[], byte[]> r) throws Exception {
        StringBuilder sb = new StringBuilder(192);
        sb.append("{\"p\":").append(r.partition())
            .append(",\"o\":").append(r.offset())
            .append(",\"ts\":").append(r.timestamp())
            .append(",\"tt\":").append(jstr(r.timestampType().name))
            .append(",\"k\":").append(b64(r.key()))
            .append(",\"v\":").append(b64(r.value()))
            .append(",\"h\":[");
        boolean first = true;
        for (Header h : r.headers()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('[').append(jstr(h.key())).append(',').append(b64(h.value())).append(']');
        }
        sb.append("]}\n");
        out.write(sb.toString());
    }

    static int offsetsForTimes(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        Map<TopicPartition, Long> query = new HashMap<>();
        List<TopicPartition> order = new ArrayList<>();
        List<Long> tsOrder = new ArrayList<>();
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            // One ListOffsets round per query so that several timestamps per partition work.
            for (String q : req(o, "query").split(",")) {
                String[] pt = q.split(":");
                TopicPartition tp = new TopicPartition(topic, Integer.parseInt(pt[0]));
                long ts = Long.parseLong(pt[1]);
                Map<TopicPartition, OffsetAndTimestamp> res =
                    consumer.offsetsForTimes(Collections.singletonMap(tp, ts), Duration.ofSeconds(30));
                OffsetAndTimestamp oat = res.get(tp);
                System.out.println("{\"p\":" + tp.partition() + ",\"ts\":" + ts + ",\"offset\":"
                    + (oat == null ? "null" : Long.toString(oat.offset())) + ",\"rts\":"
                    + (oat == null ? "null" : Long.toString(oat.timestamp())) + "}");
            }
        }
        return 0;
    }

    static int listOffsets(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        String spec = req(o, "spec");
        OffsetSpec os;
        switch (spec) {
            case "earliest":
                os = OffsetSpec.earliest();
                break;
            case "latest":
                os = OffsetSpec.latest();
                break;
            case "max-timestamp":
                os = OffsetSpec.maxTimestamp();
                break;
            default:
                os = OffsetSpec.forTimestamp(Long.parseLong(spec));
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        try (Admin admin = Admin.create(p)) {
            int n = admin.describeTopics(Collections.singleton(topic)).allTopicNames()
                .get(30, TimeUnit.SECONDS).get(topic).partitions().size();
            Map<TopicPartition, OffsetSpec> q = new HashMap<>();
            for (int i = 0; i < n; i++) {
                q.put(new TopicPartition(topic, i), os);
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
                admin.listOffsets(q).all().get(30, TimeUnit.SECONDS);
            for (int i = 0; i < n; i++) {
                ListOffsetsResult.ListOffsetsResultInfo info = res.get(new TopicPartition(topic, i));
                System.out.println("{\"p\":" + i + ",\"offset\":" + info.offset() + ",\"rts\":"
                    + info.timestamp() + "}");
            }
        }
        return 0;
    }

    static int logDirs(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        try (Admin admin = Admin.create(p)) {
            List<Integer> brokers = new ArrayList<>();
            for (Node n : admin.describeCluster().nodes().get(30, TimeUnit.SECONDS)) {
                brokers.add(n.id());
            }
            Map<Integer, Map<String, LogDirDescription>> dirs =
                admin.describeLogDirs(brokers).allDescriptions().get(30, TimeUnit.SECONDS);
            List<TopicPartitionReplica> replicas = new ArrayList<>();
            for (Map.Entry<Integer, Map<String, LogDirDescription>> b : dirs.entrySet()) {
                for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
                    LogDirDescription desc = d.getValue();
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
                        if (!r.getKey().topic().equals(topic)) {
                            continue;
                        }
                        replicas.add(new TopicPartitionReplica(topic, r.getKey().partition(), b.getKey()));
                        System.out.println("{\"b\":" + b.getKey() + ",\"dir\":" + jstr(d.getKey())
                            + ",\"p\":" + r.getKey().partition() + ",\"size\":" + r.getValue().size()
                            + ",\"lag\":" + r.getValue().offsetLag()
                            + ",\"total\":" + desc.totalBytes().orElse(-1L)
                            + ",\"usable\":" + desc.usableBytes().orElse(-1L) + "}");
                    }
                }
            }
            String target = o.get("move-to");
            if (target != null) {
                Map<TopicPartitionReplica, String> moves = new HashMap<>();
                for (TopicPartitionReplica r : replicas) {
                    moves.put(r, target);
                }
                Map<TopicPartitionReplica, KafkaFuture<Void>> results = admin.alterReplicaLogDirs(moves).values();
                for (TopicPartitionReplica r : replicas) {
                    String outcome = "ok";
                    try {
                        results.get(r).get(30, TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        outcome = e.getCause().getClass().getSimpleName();
                    }
                    System.out.println("{\"b\":" + r.brokerId() + ",\"p\":" + r.partition()
                        + ",\"moved\":" + jstr(outcome) + "}");
                }
            }
        }
        return 0;
    }

    // ------------------------------------------------------------------ group-consume

    private static BufferedWriter events;

    private static String strategyClass(String name) {
        switch (name.trim()) {
            case "range":
                return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin":
                return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky":
                return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky":
                return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default:
                return name.trim();
        }
    }

    private static int generation(KafkaConsumer<byte[], byte[]> c) {
        try {
            return c.groupMetadata().generationId();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    private static void event(String kind, int gen, Collection<TopicPartition> parts) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : parts) {
            ps.add(tp.partition());
        }
        Collections.sort(ps);
        StringBuilder sb = new StringBuilder("{\"e\":\"").append(kind).append("\",\"g\":").append(gen)
            .append(",\"p\":[");
        for (int i = 0; i < ps.size(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(ps.get(i));
        }
        sb.append("],\"t\":").append(System.currentTimeMillis()).append("}\n");
        try {
            events.write(sb.toString());
            events.flush();
        } catch (java.io.IOException e) {
            throw new RuntimeException(e);
        }
    }

    static int groupConsume(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        String stopFile = o.get("stop-file");
        double rate = Double.parseDouble(o.getOrDefault("rate", "0"));
        long maxMs = (long) (Double.parseDouble(o.getOrDefault("max-seconds", "300")) * 1000);

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, req(o, "bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, req(o, "group"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (o.containsKey("strategy")) {
            List<String> classes = new ArrayList<>();
            for (String s : o.get("strategy").split(",")) {
                classes.add(strategyClass(s));
            }
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", classes));
        }
        if (o.containsKey("session-ms")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, o.get("session-ms"));
        }
        if (o.containsKey("heartbeat-ms")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, o.get("heartbeat-ms"));
        }
        if (o.containsKey("instance-id")) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, o.get("instance-id"));
        }
        if (o.containsKey("batch")) {
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, o.get("batch"));
        }
        putProps(o, p);

        events = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        long deadline = System.currentTimeMillis() + maxMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    event("r", generation(consumer), parts);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    event("a", generation(consumer), parts);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    event("l", generation(consumer), parts);
                }
            });
            while (System.currentTimeMillis() < deadline
                    && !(stopFile != null && Files.exists(Paths.get(stopFile)))) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                long started = System.nanoTime();
                int gen = generation(consumer);
                StringBuilder sb = new StringBuilder(64 * recs.count());
                long now = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    sb.append("{\"e\":\"m\",\"p\":").append(r.partition())
                        .append(",\"o\":").append(r.offset())
                        .append(",\"v\":").append(r.value() == null ? "null"
                            : jstr(new String(r.value(), StandardCharsets.UTF_8)))
                        .append(",\"g\":").append(gen)
                        .append(",\"t\":").append(now).append("}\n");
                }
                events.write(sb.toString());
                events.flush();  // everything committed below was reported first
                try {
                    consumer.commitSync(Duration.ofSeconds(30));
                    events.write("{\"e\":\"c\",\"g\":" + gen + ",\"t\":" + System.currentTimeMillis() + "}\n");
                } catch (CommitFailedException | RebalanceInProgressException e) {
                    events.write("{\"e\":\"cf\",\"g\":" + gen + ",\"t\":" + System.currentTimeMillis()
                        + ",\"err\":" + jstr(e.getClass().getSimpleName()) + "}\n");
                }
                events.flush();
                if (rate > 0) {
                    long wantNs = (long) (recs.count() / rate * 1e9);
                    long leftMs = (wantNs - (System.nanoTime() - started)) / 1_000_000;
                    if (leftMs > 0) {
                        Thread.sleep(leftMs);
                    }
                }
            }
        }
        events.write("{\"e\":\"closed\",\"t\":" + System.currentTimeMillis() + "}\n");
        events.flush();
        return 0;
    }

    // ------------------------------------------------------------------ helpers

    private static String b64(byte[] b) {
        return b == null ? "null" : "\"" + B64.encodeToString(b) + "\"";
    }

    private static String jstr(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    private static Map<String, String> parseOptions(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--") || i + 1 >= argv.length) {
                usage("bad argument " + a);
            }
            String name = a.substring(2);
            String v = argv[++i];
            if (name.equals("prop") && m.containsKey("prop")) {
                v = m.get("prop") + "\n" + v;  // --prop k=v may repeat
            }
            m.put(name, v);
        }
        return m;
    }

    private static String req(Map<String, String> o, String name) {
        String v = o.get(name);
        if (v == null) {
            usage("missing --" + name);
        }
        return v;
    }

    private static void usage(String msg) {
        System.err.println("InteropClient: " + msg);
        System.err.println("usage: InteropClient create-topic|produce|consume|offsets-for-times|list-offsets|group-consume"
            + " --bootstrap HOST:PORT --topic T [options]  (see the header of InteropClient.java)");
        System.exit(2);
    }
}
