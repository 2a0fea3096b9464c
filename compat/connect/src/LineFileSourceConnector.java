// A Kafka Connect source connector that copies the lines of one text file into one topic,
// one record per line (value: the line as a string, no key), for
// tests/interop/test_kafka_connect.py. Its source offset is the byte position after the
// last line handed to Connect, so a restarted worker resumes after the last line whose
// offset it committed. Only complete lines (ending in '\n') are read; a partial last line
// waits for its newline.
//
// Written for pydmq's interop tests because Kafka's own FileStream connector (connect-file)
// is not served by the Maven repository the tests resolve from. Compiled by scripts/test
// with plain javac against compat/connect/lib; found by the worker through
// META-INF/services (plugin.discovery=service_load).

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

public class LineFileSourceConnector extends SourceConnector {
    static final String FILE = "file";
    static final String TOPIC = "topic";
    static final String POSITION = "position";
    static final String VERSION = "1.0";

    static final ConfigDef CONFIG =
            new ConfigDef()
                    .define(FILE, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH,
                            "Path of the text file whose lines are copied")
                    .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH,
                            "Topic the lines are written to");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = Map.copyOf(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return LineTask.class;
    }

    /** One file, one reader: a single task whatever maxTasks is. */
    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return VERSION;
    }

    /** Reads the file from the committed position; owned by the worker's task thread. */
    public static class LineTask extends SourceTask {
        private static final int CHUNK = 64 * 1024;
        private static final long IDLE_MS = 100;

        private String path;
        private String topic;
        private Map<String, String> sourcePartition;
        private long position;

        @Override
        public String version() {
            return VERSION;
        }

        @Override
        public void start(Map<String, String> props) {
            path = props.get(FILE);
            topic = props.get(TOPIC);
            sourcePartition = Map.of(FILE, path);
            Map<String, Object> stored = context.offsetStorageReader().offset(sourcePartition);
            position = stored == null ? 0L : ((Number) stored.get(POSITION)).longValue();
        }

        /** The complete lines of the next chunk (a line longer than a chunk is never read). */
        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            byte[] buf = new byte[CHUNK];
            int read;
            // opened per poll: stop() may run on another thread than poll()
            try (RandomAccessFile file = new RandomAccessFile(path, "r")) {
                file.seek(position);
                read = file.read(buf);
            } catch (IOException e) {
                throw new ConnectException(e);
            }
            List<SourceRecord> out = new ArrayList<>();
            int start = 0;
            for (int i = 0; i < Math.max(read, 0); i++) {
                if (buf[i] != '\n') {
                    continue;
                }
                String line = new String(buf, start, i - start, StandardCharsets.UTF_8);
                start = i + 1;
                Map<String, Long> offset = Map.of(POSITION, position + start);
                out.add(new SourceRecord(sourcePartition, offset, topic, null,
                        null, null, Schema.STRING_SCHEMA, line));
            }
            position += start;
            if (out.isEmpty()) {
                Thread.sleep(IDLE_MS);
                return null;
            }
            return out;
        }

        /** Nothing to release: poll() closes the file it opens. */
        @Override
        public void stop() {}
    }
}
