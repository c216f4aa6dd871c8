import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.Header;
import io.debezium.engine.format.Json;
import java.io.FileInputStream;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Test helper: runs the Debezium embedded engine and publishes every change event
 * (Debezium JSON key and value, tombstones as null values) to Kafka, to the topic
 * named by the event's destination. {@code DebeziumEngine.create(Json.class, Json.class,
 * Json.class)}: key, value and headers as JSON ({@code create(Json.class)} alone gives no
 * headers); the headers ({@code __debezium.oldkey}/{@code newkey} of a primary-key
 * update, {@code __debezium.context.*}) are copied to the Kafka record as UTF-8 JSON.
 * Each batch is sent, flushed and acknowledged (acks=all, idempotent producer) before
 * its records are marked processed.
 *
 * <p>Usage: {@code java -cp "libs/*:classes" DebeziumToKafka settings.properties}. Keys
 * starting with {@code producer.} configure the Kafka producer (prefix removed); every
 * other key goes to the engine.
 *
 * <p>Stdout protocol (one line each, flushed): {@code PUBLISHED <n>} after every batch
 * was acknowledged by Kafka (n = total records so far, tombstones included);
 * {@code READY} once the initial snapshot completed, every snapshot record is in Kafka
 * and the replication stream is connected; {@code STOPPED} after a clean shutdown;
 * {@code FAILED <message>} when the engine stopped with an error (exit code 1).
 * SIGTERM closes the engine (and so drops the slot when {@code slot.drop.on.stop=true}).
 */
public final class DebeziumToKafka {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final AtomicLong published = new AtomicLong();
    private static final AtomicLong snapshotPublished = new AtomicLong();
    private static final AtomicBoolean stopping = new AtomicBoolean();
    private static final AtomicBoolean failed = new AtomicBoolean();

    private DebeziumToKafka() {}

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static byte[] headerBytes(Object value) {
        if (value == null) {
            return null;
        }
        if (value instanceof byte[]) {
            return (byte[]) value;
        }
        return value.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static boolean isSnapshotRecord(String value) {
        if (value == null) {
            return false;
        }
        try {
            JsonNode node = JSON.readTree(value);
            JsonNode payload = node.has("schema") && node.has("payload") ? node.get("payload") : node;
            return "r".equals(payload.path("op").asText());
        } catch (Exception e) {
            return false;
        }
    }

    /** The first MBean of Debezium's metrics for this connector and context, or null. */
    private static ObjectName metrics(MBeanServer server, String prefix, String context) throws Exception {
        Set<ObjectName> names = server.queryNames(
                new ObjectName("debezium.postgres:type=connector-metrics,context=" + context + ",*"), null);
        for (ObjectName name : names) {
            String s = name.getKeyProperty("server");
            if (prefix.equals(s) || ObjectName.quote(prefix).equals(s)) {
                return name;
            }
        }
        return null;
    }

    /** Snapshot completed, all its records published, replication stream connected. */
    private static boolean ready(String prefix) {
        try {
            MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            ObjectName snapshot = metrics(server, prefix, "snapshot");
            ObjectName streaming = metrics(server, prefix, "streaming");
            if (snapshot == null || streaming == null) {
                return false;
            }
            boolean completed = Boolean.TRUE.equals(server.getAttribute(snapshot, "SnapshotCompleted"));
            long seen = ((Number) server.getAttribute(snapshot, "TotalNumberOfEventsSeen")).longValue();
            boolean connected = Boolean.TRUE.equals(server.getAttribute(streaming, "Connected"));
            return completed && connected && snapshotPublished.get() >= seen;
        } catch (Exception e) {
            return false;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: DebeziumToKafka settings.properties");
            System.exit(2);
        }
        Properties all = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            all.load(in);
        }
        Properties engineProps = new Properties();
        Properties producerProps = new Properties();
        for (String key : all.stringPropertyNames()) {
            if (key.startsWith("producer.")) {
                producerProps.setProperty(key.substring("producer.".length()), all.getProperty(key));
            } else {
                engineProps.setProperty(key, all.getProperty(key));
            }
        }
        producerProps.putIfAbsent("acks", "all");
        producerProps.putIfAbsent("enable.idempotence", "true");
        String prefix = engineProps.getProperty("topic.prefix");

        KafkaProducer<String, String> producer =
                new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer());
        CountDownLatch done = new CountDownLatch(1);

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class, Json.class, Json.class)
                .using(engineProps)
                .notifying((List<ChangeEvent<String, String>> records,
                            DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) -> {
                    List<Future<RecordMetadata>> sent = new ArrayList<>(records.size());
                    long snapshotRecords = 0;
                    for (ChangeEvent<String, String> record : records) {
                        ProducerRecord<String, String> out = new ProducerRecord<>(
                                record.destination(), record.partition(), record.key(), record.value());
                        List<Header<Object>> headers = record.headers();
                        if (headers != null) {
                            for (Header<Object> h : headers) {
                                out.headers().add(h.getKey(), headerBytes(h.getValue()));
                            }
                        }
                        sent.add(producer.send(out));
                        if (isSnapshotRecord(record.value())) {
                            snapshotRecords++;
                        }
                    }
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) {
                        try {
                            f.get();
                        } catch (java.util.concurrent.ExecutionException e) {
                            throw new RuntimeException("Kafka rejected a record: " + e.getCause(), e.getCause());
                        }
                    }
                    for (ChangeEvent<String, String> record : records) {
                        committer.markProcessed(record);
                    }
                    committer.markBatchFinished();
                    snapshotPublished.addAndGet(snapshotRecords);
                    say("PUBLISHED " + published.addAndGet(records.size()));
                })
                .using((boolean success, String message, Throwable error) -> {
                    if (!success) {
                        failed.set(true);
                        say("FAILED " + message + (error != null ? ": " + error : ""));
                        if (error != null) {
                            error.printStackTrace();
                        }
                    }
                    done.countDown();
                })
                .build();

        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            try {
                engine.close();
                done.await(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            }
            executor.shutdown();
            producer.close(Duration.ofSeconds(10));
            say("STOPPED");
        }, "debezium-to-kafka-shutdown"));

        boolean announced = false;
        while (!done.await(100, TimeUnit.MILLISECONDS)) {
            if (!announced && ready(prefix)) {
                announced = true;
                say("READY");
            }
        }
        if (!stopping.get()) {
            // the engine ended on its own (an error, or a snapshot-only mode)
            System.exit(failed.get() ? 1 : 0);
        }
    }
}
