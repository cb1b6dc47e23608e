package org.mongocdc.dbzoracle;

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.embedded.Connect;

/**
 * Runs Debezium's MongoDB connector in the embedded engine and writes every record it
 * produces as one line, in the layout of mongocdc's JSON-lines sink:
 * {"topic": "...", "key": KEY, "value": VALUE|null[, "headers": {...}]}, key and value
 * converted with Kafka Connect's JsonConverter and headers with its SimpleHeaderConverter,
 * exactly the bytes Kafka Connect would produce.
 *
 * Arguments: PROPERTIES_FILE OUTPUT_FILE STOP_FILE. The engine runs until STOP_FILE exists,
 * then stops (committing its offsets, kept in the file the properties name).
 */
public final class Run {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        boolean keySchemas = Boolean.parseBoolean(props.getProperty("key.converter.schemas.enable", "true"));
        boolean valueSchemas = Boolean.parseBoolean(props.getProperty("value.converter.schemas.enable", "true"));
        JsonConverter keyConv = new JsonConverter();
        Map<String, Object> kc = new HashMap<>();
        kc.put("schemas.enable", keySchemas);
        keyConv.configure(kc, true);
        JsonConverter valueConv = new JsonConverter();
        Map<String, Object> vc = new HashMap<>();
        vc.put("schemas.enable", valueSchemas);
        valueConv.configure(vc, false);
        SimpleHeaderConverter headerConv = new SimpleHeaderConverter();
        headerConv.configure(new HashMap<>());

        Writer out = new OutputStreamWriter(new FileOutputStream(args[1], true), StandardCharsets.UTF_8);
        AtomicLong count = new AtomicLong();
        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(props)
                .notifying((List<ChangeEvent<SourceRecord, SourceRecord>> records,
                            DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer) -> {
                    for (ChangeEvent<SourceRecord, SourceRecord> e : records) {
                        SourceRecord r = e.value(); /* the Connect format hands the record itself */
                        StringBuilder sb = new StringBuilder();
                        sb.append("{\"topic\": ").append(quote(r.topic()));
                        byte[] k = keyConv.fromConnectData(r.topic(), r.keySchema(), r.key());
                        sb.append(", \"key\": ").append(k == null ? "null" : new String(k, StandardCharsets.UTF_8));
                        byte[] v = valueConv.fromConnectData(r.topic(), r.valueSchema(), r.value());
                        sb.append(", \"value\": ").append(v == null ? "null" : new String(v, StandardCharsets.UTF_8));
                        if (r.headers() != null && !r.headers().isEmpty()) {
                            sb.append(", \"headers\": {");
                            boolean first = true;
                            for (Header h : r.headers()) {
                                byte[] hv = headerConv.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value());
                                if (!first)
                                    sb.append(", ");
                                first = false;
                                sb.append(quote(h.key())).append(": ")
                                  .append(hv == null ? "null" : quote(new String(hv, StandardCharsets.UTF_8)));
                            }
                            sb.append("}");
                        }
                        sb.append("}\n");
                        write(out, sb.toString(), false);
                        committer.markProcessed(e);
                        count.incrementAndGet();
                    }
                    write(out, "", true);
                    committer.markBatchFinished();
                })
                .using((success, message, error) -> {
                    System.err.println("engine stopped: success=" + success + " " + message);
                    if (error != null)
                        error.printStackTrace();
                })
                .build();
        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        Path stop = Path.of(args[2]);
        while (!Files.exists(stop))
            Thread.sleep(100);
        engine.close();
        ex.shutdown();
        ex.awaitTermination(60, TimeUnit.SECONDS);
        synchronized (out) {
            out.close();
        }
        System.err.println("records: " + count.get());
    }

    static void write(Writer out, String s, boolean flush) {
        synchronized (out) {
            try {
                out.write(s);
                if (flush)
                    out.flush();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    /** A JSON string as mongocdc's JSON-lines sink writes topic and header texts. */
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\')
                b.append('\\').append(c);
            else if (c < 0x20)
                b.append(String.format("\\u%04x", (int) c));
            else
                b.append(c);
        }
        return b.append('"').toString();
    }
}
