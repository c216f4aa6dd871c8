package io.streamingengine.spark;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * Sends one epoch of a Kafka sink through ONE producer on the driver (the
 * Kafka sink's writer, {@code sinks/_kafka_write.py}): the epoch's records
 * are read with {@code Dataset.toLocalIterator()} (one partition at a time)
 * and sent with kafka-clients; Python makes a handful of calls per epoch,
 * never one per record.
 *
 * <p>Records: a Dataset with the columns {@code table} (the table id, for
 * the counts), {@code topic}, {@code partition} (int, null: the producer's
 * partitioner), {@code key} and {@code value} (strings, sent as UTF-8,
 * null allowed), {@code kind} and {@code source} (Debezium only: the row
 * kind and the JSON of the event's source block). With {@code debezium}
 * the value is the row's image (a JSON object) and each record becomes a
 * Debezium envelope: +I a {@code c}, -D a {@code d} with the before image,
 * a -U directly followed by the +U of the same table and key one {@code u}
 * with both images; a -U without its +U a {@code d}, a +U without its -U a
 * {@code u} with {@code before = null}.
 *
 * <p>Exactly once: with a transactional id the producer is transactional
 * ({@link #initAndReadMark} fences any older producer of the id, aborting
 * or completing its open transaction, then reads the epoch this sink's
 * group last committed); {@link #commit} records the epoch as the group's
 * offset of {@code markTopic}-0 with {@code sendOffsetsToTransaction}, in
 * the same transaction as the records, and commits.
 */
public final class KafkaEpochWriter implements AutoCloseable {
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);
    private static final long ADMIN_TIMEOUT_S = 120;

    private final Properties settings;
    private final String transactionalId;
    private final boolean failOnError;
    private final KafkaProducer<byte[], byte[]> producer;
    private final AtomicReference<Exception> firstError = new AtomicReference<>();
    private final AtomicLong failed = new AtomicLong();

    /**
     * @param settingsJson the client settings, a JSON object of strings
     *     (bootstrap.servers and kafka.config)
     * @param transactionalId null: a plain producer
     * @param failOnError a failed send fails {@link #send} (else it is counted)
     */
    public KafkaEpochWriter(String settingsJson, String transactionalId, boolean failOnError) throws Exception {
        this.settings = parse(settingsJson);
        this.transactionalId = transactionalId;
        this.failOnError = failOnError;
        Properties props = new Properties();
        props.putAll(settings); // kafka.config: producer settings, passed through
        props.setProperty(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.setProperty(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (transactionalId != null) {
            props.setProperty(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
            props.setProperty(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        }
        this.producer = new KafkaProducer<>(props);
    }

    private static Properties parse(String json) throws Exception {
        com.fasterxml.jackson.databind.JsonNode node = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json);
        Properties out = new Properties();
        for (Iterator<Map.Entry<String, com.fasterxml.jackson.databind.JsonNode>> it = node.fields(); it.hasNext();) {
            Map.Entry<String, com.fasterxml.jackson.databind.JsonNode> e = it.next();
            out.setProperty(e.getKey(), e.getValue().asText());
        }
        return out;
    }

    private static Admin admin(Properties settings) {
        Properties props = new Properties();
        Set<String> known = AdminClientConfig.configNames();
        for (String name : settings.stringPropertyNames()) {
            if (known.contains(name)) {
                props.setProperty(name, settings.getProperty(name));
            }
        }
        return Admin.create(props);
    }

    /** Create {@code topic} with one partition unless it exists (the sink's epoch marks live in its offsets). */
    public static void ensureTopic(String settingsJson, String topic) throws Exception {
        try (Admin admin = admin(parse(settingsJson))) {
            if (admin.listTopics().names().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS).contains(topic)) {
                return;
            }
            NewTopic t = new NewTopic(topic, Optional.of(1), Optional.empty());
            try {
                admin.createTopics(Collections.singletonList(t)).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
        }
    }

    /**
     * Transactional only: {@code initTransactions} (fences every older
     * producer of the id; its open transaction is aborted, or completed if
     * it was committing), then the epoch {@code group} holds as its offset
     * of {@code markTopic}-0, read with {@code requireStable} (-1: none).
     */
    public long initAndReadMark(String group, String markTopic) throws Exception {
        producer.initTransactions();
        return readMark(settings, group, markTopic);
    }

    static long readMark(Properties settings, String group, String markTopic) throws Exception {
        TopicPartition tp = new TopicPartition(markTopic, 0);
        try (Admin admin = admin(settings)) {
            Map<String, ListConsumerGroupOffsetsSpec> spec = Collections.singletonMap(
                group, new ListConsumerGroupOffsetsSpec().topicPartitions(Collections.singletonList(tp)));
            Map<TopicPartition, OffsetAndMetadata> offsets = admin
                .listConsumerGroupOffsets(spec, new ListConsumerGroupOffsetsOptions().requireStable(true))
                .partitionsToOffsetAndMetadata(group)
                .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            OffsetAndMetadata found = offsets.get(tp);
            return found == null ? -1L : found.offset();
        }
    }

    public void begin() {
        producer.beginTransaction();
    }

    /**
     * Send every record of {@code records}, then flush. Returns one line per
     * table: {@code table TAB rows TAB records}. Throws the first failed send
     * when failing on errors; else failures are counted ({@link #failedSends}).
     */
    public String[] send(Dataset<Row> records, boolean debezium, long tsMs) throws Exception {
        StructType schema = records.schema();
        int iTable = schema.fieldIndex("table");
        int iTopic = schema.fieldIndex("topic");
        int iPartition = schema.fieldIndex("partition");
        int iKey = schema.fieldIndex("key");
        int iValue = schema.fieldIndex("value");
        int iKind = debezium ? schema.fieldIndex("kind") : -1;
        int iSource = debezium ? schema.fieldIndex("source") : -1;
        Map<String, long[]> counts = new LinkedHashMap<>();
        Callback callback = (metadata, error) -> {
            if (error != null) {
                failed.incrementAndGet();
                firstError.compareAndSet(null, error);
            }
        };
        Row pending = null; // a -U waiting for its +U
        Iterator<Row> it = records.toLocalIterator();
        long n = 0;
        while (it.hasNext()) {
            Row r = it.next();
            String table = r.getString(iTable);
            long[] c = counts.computeIfAbsent(table, k -> new long[2]);
            c[0]++;
            if (!debezium) {
                send(r.getString(iTopic), partition(r, iPartition), r.getString(iKey), r.getString(iValue), callback);
                c[1]++;
            } else {
                String kind = r.getString(iKind);
                if (pending != null) {
                    boolean pair = "+U".equals(kind)
                        && Objects.equals(table, pending.getString(iTable))
                        && Objects.equals(r.getString(iTopic), pending.getString(iTopic))
                        && Objects.equals(r.getString(iKey), pending.getString(iKey));
                    if (pair) {
                        sendEvent(r, iTopic, iPartition, iKey, pending.getString(iValue), r.getString(iValue), "u",
                            r.getString(iSource), tsMs, callback);
                        c[1]++;
                        pending = null;
                        continue;
                    }
                    sendEvent(pending, iTopic, iPartition, iKey, pending.getString(iValue), null, "d",
                        pending.getString(iSource), tsMs, callback);
                    counts.get(pending.getString(iTable))[1]++;
                    pending = null;
                }
                if ("-U".equals(kind)) {
                    pending = r;
                    continue;
                }
                String value = r.getString(iValue);
                if ("-D".equals(kind)) {
                    sendEvent(r, iTopic, iPartition, iKey, value, null, "d", r.getString(iSource), tsMs, callback);
                } else if ("+U".equals(kind)) {
                    sendEvent(r, iTopic, iPartition, iKey, null, value, "u", r.getString(iSource), tsMs, callback);
                } else {
                    sendEvent(r, iTopic, iPartition, iKey, null, value, "c", r.getString(iSource), tsMs, callback);
                }
                c[1]++;
            }
            if ((++n & 1023) == 0) {
                check();
            }
        }
        if (pending != null) {
            sendEvent(pending, iTopic, iPartition, iKey, pending.getString(iValue), null, "d",
                pending.getString(iSource), tsMs, callback);
            counts.get(pending.getString(iTable))[1]++;
        }
        producer.flush();
        check();
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, long[]> e : counts.entrySet()) {
            out.add(e.getKey() + "\t" + e.getValue()[0] + "\t" + e.getValue()[1]);
        }
        return out.toArray(new String[0]);
    }

    private static Integer partition(Row r, int i) {
        return r.isNullAt(i) ? null : r.getInt(i);
    }

    private void sendEvent(Row r, int iTopic, int iPartition, int iKey, String before, String after, String op,
                           String source, long tsMs, Callback callback) {
        StringBuilder v = new StringBuilder(64 + (before == null ? 4 : before.length()) + (after == null ? 4 : after.length()));
        v.append("{\"before\":").append(before == null ? "null" : before)
            .append(",\"after\":").append(after == null ? "null" : after)
            .append(",\"op\":\"").append(op).append('"')
            .append(",\"source\":").append(source == null ? "null" : source)
            .append(",\"ts_ms\":").append(tsMs).append('}');
        send(r.getString(iTopic), partition(r, iPartition), r.getString(iKey), v.toString(), callback);
    }

    private void send(String topic, Integer partition, String key, String value, Callback callback) {
        byte[] k = key == null ? null : key.getBytes(StandardCharsets.UTF_8);
        byte[] v = value == null ? null : value.getBytes(StandardCharsets.UTF_8);
        producer.send(new ProducerRecord<>(topic, partition, k, v), callback);
    }

    private void check() throws Exception {
        Exception e = firstError.get();
        if (e != null && failOnError) {
            throw new RuntimeException("a Kafka send failed (" + failed.get() + " so far): " + e, e);
        }
    }

    public long failedSends() {
        return failed.get();
    }

    /** Record {@code epoch} as {@code group}'s offset of {@code markTopic}-0 in the open transaction, and commit. */
    public void commit(String group, String markTopic, long epoch, String metadata) {
        Map<TopicPartition, OffsetAndMetadata> mark = Collections.singletonMap(
            new TopicPartition(markTopic, 0), new OffsetAndMetadata(epoch, metadata));
        producer.sendOffsetsToTransaction(mark, new ConsumerGroupMetadata(group));
        producer.commitTransaction();
    }

    /** Abort the open transaction; false when that is not possible (fenced, or nothing open). */
    public boolean abort() {
        try {
            producer.abortTransaction();
            return true;
        } catch (RuntimeException e) {
            return false;
        }
    }

    @Override
    public void close() {
        producer.close(CLOSE_TIMEOUT);
    }

    /** Close without waiting for unsent records (after a failure). */
    public void closeNow() {
        producer.close(Duration.ZERO);
    }

    public String transactionalId() {
        return transactionalId;
    }
}
