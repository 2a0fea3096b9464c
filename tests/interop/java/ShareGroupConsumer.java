// A KafkaShareConsumer for tests/interop/test_share_groups.py (compiled by the test with javac).
//
//   java -cp 'target:compat/java/lib/*' ShareGroupConsumer BOOTSTRAP TOPIC GROUP MAX_MS STOP_FILE
//
// Polls until MAX_MS elapsed or STOP_FILE exists, acknowledging every record ACCEPT (explicit
// mode, commitSync after each poll), then close()s. Prints one line per event, flushed:
// "R <offset> <value> <deliveryCount>" per record, "C" after a commit of them all that
// succeeded, "E <error>" on failures, "X" once closed.
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareGroupConsumer {
    public static void main(String[] argv) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", argv[0]);
        props.put("group.id", argv[2]);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("share.acknowledgement.mode", "explicit");
        long deadline = System.currentTimeMillis() + Long.parseLong(argv[3]);
        File stop = new File(argv[4]);
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(Collections.singletonList(argv[1]));
            while (System.currentTimeMillis() < deadline && !stop.exists()) {
                try {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        String value = new String(r.value(), StandardCharsets.UTF_8);
                        Optional<Short> count = r.deliveryCount();
                        System.out.println("R " + r.offset() + " " + value + " " + count.orElse((short) -1));
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    if (!records.isEmpty()) {
                        Map<TopicIdPartition, Optional<org.apache.kafka.common.KafkaException>> result =
                            consumer.commitSync();
                        boolean failed = false;
                        for (Optional<org.apache.kafka.common.KafkaException> e : result.values()) {
                            if (e.isPresent()) {
                                failed = true;
                                System.out.println("E " + e.get());
                            }
                        }
                        if (!failed) {
                            System.out.println("C");
                        }
                    }
                    System.out.flush();
                } catch (Exception e) {
                    System.out.println("E " + e);
                    System.out.flush();
                }
            }
        }
        System.out.println("X");
        System.out.flush();
    }
}
