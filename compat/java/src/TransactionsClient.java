// Transactions driver for the Apache Kafka Java client (kafka-clients 4.x): the
// transactional KafkaProducer and a read_committed KafkaConsumer.
//
// Used by tests/interop/test_java_transactions.py, which compiles it with plain javac into a
// temporary directory against compat/java/lib (the jars scripts/test resolves):
//   javac -cp 'compat/java/lib/*' -d OUT compat/java/src/TransactionsClient.java
//   java -cp 'OUT:compat/java/lib/*' TransactionsClient <command> [--option value]...
//
// Commands (every record value is ASCII; partitions are those of the topic's metadata)
//   produce  --bootstrap B --topic T --tid ID --plan commit:N,abort:N,...
//            One transactional producer: per step of the plan a transaction of N records
//            (value "<tid>/<step>/<n>", partition n % P), committed or aborted. One JSON line
//            per record: {"step":S,"outcome":"commit"|"abort","p":..,"o":..,"v":".."}.
//   fence    --bootstrap B --topic T --tid ID
//            Producer "old" begins a transaction and flushes one record ("<tid>/old") to
//            partition 0; producer "new" initialises the same transactional id (fencing
//            "old", whose open transaction the coordinator aborts); "old" then tries to
//            commit: {"fenced":"<exception class>"}; "new" commits one record
//            ("<tid>/new"): {"new":{"p":..,"o":..}}.
//   copy     --bootstrap B --input I --output O --group G --tid ID --count N
//            [--abort-first true] [--timeout-ms MS]
//            Consume-transform-produce (KIP-98/KIP-447): a subscribed read_committed member
//            of G; per poll batch one transaction writes "copy/<input value>" to the same
//            partition of O and sends the batch's next offsets with the member's group
//            metadata (sendOffsetsToTransaction). With --abort-first the first transaction
//            is aborted and the member seeks back to the group's committed offsets. Stops
//            once N inputs are committed: {"committed":C,"aborted":A,"inputs":N}.
//   consume  --bootstrap B --topic T --isolation read_committed|read_uncommitted
//            Assigned to every partition from the beginning, up to the end offsets at that
//            isolation level (the last stable offset for read_committed): one JSON line per
//            record {"p":..,"o":..,"v":".."}, then {"end":{"<p>":offset,...}}.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransactionsClient {

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            usage("missing command");
        }
        Map<String, String> o = parseOptions(argv);
        int rc;
        switch (argv[0]) {
            case "produce":
                rc = produce(o);
                break;
            case "fence":
                rc = fence(o);
                break;
            case "copy":
                rc = copy(o);
                break;
            case "consume":
                rc = consume(o);
                break;
            default:
                usage("unknown command " + argv[0]);
                rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    // ------------------------------------------------------------------ clients

    static KafkaProducer<byte[], byte[]> transactionalProducer(String bootstrap, String tid) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return new KafkaConsumer<>(p);
    }

    static int partitionCount(KafkaProducer<byte[], byte[]> producer, String topic) {
        return producer.partitionsFor(topic).size();
    }

    // ------------------------------------------------------------------ commands

    static int produce(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        String tid = req(o, "tid");
        try (KafkaProducer<byte[], byte[]> producer = transactionalProducer(req(o, "bootstrap"), tid)) {
            int partitions = partitionCount(producer, topic);
            String[] steps = req(o, "plan").split(",");
            for (int step = 0; step < steps.length; step++) {
                String[] parts = steps[step].split(":");
                boolean commit = parts[0].equals("commit");
                int count = Integer.parseInt(parts[1]);
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                List<String> values = new ArrayList<>();
                for (int n = 0; n < count; n++) {
                    String v = tid + "/" + step + "/" + n;
                    values.add(v);
                    sent.add(producer.send(new ProducerRecord<>(topic, n % partitions, null, bytes(v))));
                }
                producer.flush();
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                for (int n = 0; n < count; n++) {
                    RecordMetadata md = sent.get(n).get(60, TimeUnit.SECONDS);
                    System.out.println("{\"step\":" + step + ",\"outcome\":\"" + parts[0] + "\",\"p\":"
                        + md.partition() + ",\"o\":" + md.offset() + ",\"v\":\"" + values.get(n) + "\"}");
                }
            }
        }
        return 0;
    }

    static int fence(Map<String, String> o) throws Exception {
        String bootstrap = req(o, "bootstrap");
        String topic = req(o, "topic");
        String tid = req(o, "tid");
        KafkaProducer<byte[], byte[]> old = transactionalProducer(bootstrap, tid);
        old.beginTransaction();
        old.send(new ProducerRecord<>(topic, 0, null, bytes(tid + "/old"))).get(60, TimeUnit.SECONDS);
        try (KafkaProducer<byte[], byte[]> fresh = transactionalProducer(bootstrap, tid)) {
            String fenced = "none";
            try {
                old.commitTransaction();
            } catch (KafkaException e) {
                fenced = e.getClass().getSimpleName();
            } finally {
                old.close(Duration.ofSeconds(10));
            }
            System.out.println("{\"fenced\":\"" + fenced + "\"}");
            fresh.beginTransaction();
            RecordMetadata md = fresh.send(new ProducerRecord<>(topic, 0, null, bytes(tid + "/new")))
                .get(60, TimeUnit.SECONDS);
            fresh.commitTransaction();
            System.out.println("{\"new\":{\"p\":" + md.partition() + ",\"o\":" + md.offset() + "}}");
        }
        return 0;
    }

    static int copy(Map<String, String> o) throws Exception {
        String bootstrap = req(o, "bootstrap");
        String output = req(o, "output");
        long wanted = Long.parseLong(req(o, "count"));
        boolean abortFirst = Boolean.parseBoolean(o.getOrDefault("abort-first", "false"));
        long deadline = System.currentTimeMillis() + Long.parseLong(o.getOrDefault("timeout-ms", "90000"));
        long inputs = 0;
        int committed = 0;
        int aborted = 0;
        try (KafkaConsumer<byte[], byte[]> member = consumer(bootstrap, req(o, "group"), "read_committed");
             KafkaProducer<byte[], byte[]> producer = transactionalProducer(bootstrap, req(o, "tid"))) {
            member.subscribe(Collections.singletonList(req(o, "input")));
            while (inputs < wanted) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("copy: " + inputs + " of " + wanted + " inputs committed in time");
                    return 3;
                }
                ConsumerRecords<byte[], byte[]> batch = member.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    byte[] v = bytes("copy/" + new String(r.value(), StandardCharsets.UTF_8));
                    producer.send(new ProducerRecord<>(output, r.partition(), null, v));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, member.groupMetadata());
                if (abortFirst && aborted == 0) {
                    // Sent first: an abort fails the batches not sent yet, so without the
                    // flush whether the aborted records reach the log would be timing.
                    producer.flush();
                    producer.abortTransaction();
                    aborted++;
                    rewind(member);
                } else {
                    producer.commitTransaction();
                    committed++;
                    inputs += batch.count();
                }
            }
        }
        System.out.println("{\"committed\":" + committed + ",\"aborted\":" + aborted + ",\"inputs\":" + inputs + "}");
        return 0;
    }

    /** Back to the group's committed offsets (the beginning where there are none). */
    static void rewind(KafkaConsumer<byte[], byte[]> member) {
        Set<TopicPartition> assigned = member.assignment();
        Map<TopicPartition, OffsetAndMetadata> done = member.committed(assigned, Duration.ofSeconds(30));
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata at = done.get(tp);
            if (at == null) {
                member.seekToBeginning(Collections.singletonList(tp));
            } else {
                member.seek(tp, at.offset());
            }
        }
    }

    static int consume(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long deadline = System.currentTimeMillis() + Long.parseLong(o.getOrDefault("timeout-ms", "60000"));
        try (KafkaConsumer<byte[], byte[]> c = consumer(req(o, "bootstrap"), null, req(o, "isolation"))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(30));
            while (!reached(c, ends)) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("consume: end offsets " + ends + " not reached in time");
                    return 3;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    if (r.offset() < ends.get(new TopicPartition(r.topic(), r.partition()))) {
                        System.out.println("{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":\""
                            + new String(r.value(), StandardCharsets.UTF_8) + "\"}");
                    }
                }
            }
            StringBuilder sb = new StringBuilder("{\"end\":{");
            String sep = "";
            for (Map.Entry<Integer, Long> e : new TreeMap<>(byPartition(ends)).entrySet()) {
                sb.append(sep).append('"').append(e.getKey()).append("\":").append(e.getValue());
                sep = ",";
            }
            System.out.println(sb.append("}}"));
        }
        return 0;
    }

    static boolean reached(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (c.position(e.getKey(), Duration.ofSeconds(30)) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    static Map<Integer, Long> byPartition(Map<TopicPartition, Long> ends) {
        Map<Integer, Long> out = new HashMap<>();
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            out.put(e.getKey().partition(), e.getValue());
        }
        return out;
    }

    // ------------------------------------------------------------------ options

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static Map<String, String> parseOptions(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                usage("bad argument " + argv[i]);
            }
            m.put(argv[i].substring(2), argv[++i]);
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
        System.err.println("TransactionsClient: " + msg);
        System.err.println("usage: TransactionsClient produce|fence|copy|consume --bootstrap HOST:PORT [options]"
            + "  (see the header of TransactionsClient.java)");
        System.exit(2);
    }
}
