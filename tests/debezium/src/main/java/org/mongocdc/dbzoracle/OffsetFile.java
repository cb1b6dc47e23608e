package org.mongocdc.dbzoracle;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.storage.FileOffsetBackingStore;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;

/**
 * Kafka Connect's own FileOffsetBackingStore (the offsets file of Debezium Server and of
 * the embedded engine), driven from the command line so that tests can check mongocdc's
 * reader and writer of that file against the real class.
 *
 *   write FILE   stdin: lines "KEY\tVALUE" (UTF-8; VALUE "null" stores a Java null);
 *                the store is started on FILE (loading what it holds), the entries are
 *                set, and the store is stopped (FileOffsetBackingStore.save()).
 *   read FILE    loads FILE with the store and prints its entries, one
 *                "base64(KEY)\tbase64(VALUE)|null" line each, sorted.
 */
public final class OffsetFile {
    private static MemoryOffsetBackingStore open(String file) throws Exception {
        FileOffsetBackingStore store;
        /* Kafka 3.5+ takes the key converter; older releases have a no-argument constructor. */
        Constructor<FileOffsetBackingStore> c;
        try {
            c = FileOffsetBackingStore.class.getConstructor(
                    Class.forName("org.apache.kafka.connect.storage.Converter"));
            JsonConverter kc = new JsonConverter();
            Map<String, Object> conf = new HashMap<>();
            conf.put("schemas.enable", false);
            kc.configure(conf, true);
            store = c.newInstance(kc);
        } catch (NoSuchMethodException e) {
            store = FileOffsetBackingStore.class.getConstructor().newInstance();
        }
        Map<String, String> props = new HashMap<>();
        props.put("offset.storage.file.filename", file);
        props.put("bootstrap.servers", "localhost:9092");
        props.put("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        props.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        store.configure(new StandaloneConfig(props));
        store.start();
        return store;
    }

    @SuppressWarnings("unchecked")
    private static Map<ByteBuffer, ByteBuffer> data(MemoryOffsetBackingStore store) throws Exception {
        Field f = MemoryOffsetBackingStore.class.getDeclaredField("data");
        f.setAccessible(true);
        return (Map<ByteBuffer, ByteBuffer>) f.get(store);
    }

    public static void main(String[] args) throws Exception {
        MemoryOffsetBackingStore store = open(args[1]);
        if (args[0].equals("write")) {
            Map<ByteBuffer, ByteBuffer> values = new HashMap<>();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null;) {
                int tab = line.indexOf('\t');
                String v = line.substring(tab + 1);
                values.put(ByteBuffer.wrap(line.substring(0, tab).getBytes(StandardCharsets.UTF_8)),
                           v.equals("null") ? null : ByteBuffer.wrap(v.getBytes(StandardCharsets.UTF_8)));
            }
            store.set(values, null).get(30, TimeUnit.SECONDS);
        } else {
            TreeMap<String, String> out = new TreeMap<>();
            for (Map.Entry<ByteBuffer, ByteBuffer> e : data(store).entrySet()) {
                out.put(Base64.getEncoder().encodeToString(e.getKey().array()),
                        e.getValue() == null ? "null" : Base64.getEncoder().encodeToString(e.getValue().array()));
            }
            for (Map.Entry<String, String> e : out.entrySet())
                System.out.println(e.getKey() + "\t" + e.getValue());
        }
        store.stop();
    }
}
