// A subscribe() consumer for tests/interop/test_kip848.py (compiled by the test with javac).
//
//   java -cp 'target:compat/java/lib/*' Kip848Consumer BOOTSTRAP TOPIC GROUP MAX_MS STOP_FILE [k=v]...
//
// Polls until MAX_MS elapsed or STOP_FILE exists, then close()s (leaving the group). Prints
// one line per event, flushed: "A <p,p,...>" after every assignment change, "R <partition>
// <offset>" per record, "C" after each successful commitSync, "E <error>" on failures,
// "X" once closed. Extra k=v arguments are consumer properties (group.protocol=consumer ...).
import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Kip848Consumer {
    public static void main(String[] argv) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", argv[0]);
        props.put("group.id", argv[2]);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        for (int i = 5; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            props.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        long deadline = System.currentTimeMillis() + Long.parseLong(argv[3]);
        File stop = new File(argv[4]);
        TreeSet<Integer> owned = new TreeSet<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(Collections.singletonList(argv[1]), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    for (TopicPartition tp : partitions) owned.remove(tp.partition());
                    print(owned);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    for (TopicPartition tp : partitions) owned.add(tp.partition());
                    print(owned);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    onPartitionsRevoked(partitions);
                }
            });
            while (System.currentTimeMillis() < deadline && !stop.exists()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    out.append("R ").append(r.partition()).append(' ').append(r.offset()).append('\n');
                }
                System.out.print(out);
                System.out.flush();
                try {
                    consumer.commitSync(Duration.ofSeconds(10));
                    line("C");
                } catch (Exception e) {
                    line("E " + e.toString().replace('\n', ' '));
                }
            }
        }
        line("X");
    }

    static void print(TreeSet<Integer> owned) {
        List<String> parts = new ArrayList<>();
        for (Integer p : owned) parts.add(p.toString());
        line("A " + String.join(",", parts));
    }

    static synchronized void line(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
