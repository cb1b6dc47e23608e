package org.mongocdc.oracle;

import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.PrintStream;

import java.nio.ByteBuffer;

import org.bson.BsonBinaryReader;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.bson.Document;
import org.bson.RawBsonDocument;
import org.bson.codecs.BsonDocumentCodec;
import org.bson.codecs.DecoderContext;
import org.bson.codecs.DocumentCodec;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

/**
 * Reads raw concatenated BSON documents from stdin and prints each one as one
 * line of extended JSON, with the settings Debezium uses (debezium-format.md
 * §2.1, JsonSerialization.java), after decoding it into a BsonDocument as
 * the driver hands documents to Debezium:
 *
 *   strict   COMPACT_JSON_SETTINGS (STRICT, indent with empty strings): after/before
 *   relaxed  SIMPLE_JSON_SETTINGS  (RELAXED, same indentation trick)
 *   default  BsonDocument.toJson() (RELAXED, not indented): legacy updatedFields
 *   key      getDocumentId(): {"_": <_id>} with SIMPLE_JSON_SETTINGS, first 6
 *            characters and the last one cut off
 *
 *   raw-strict  STRICT compact straight from the raw bytes (no map: repeated
 *            field names all kept), for comparison
 *   document STRICT compact through org.bson.Document, as Debezium 1.9 renders
 *            `after` (DocumentCodec decode, then Document.toJson; §2.4)
 *   all      the five above, one line each, in that order, per document
 *
 * Usage: java -cp classes:bson.jar org.mongocdc.oracle.Oracle
 *            strict|relaxed|default|key|document|all
 */
public final class Oracle {
    private static final JsonWriterSettings COMPACT = JsonWriterSettings.builder()
            .outputMode(JsonMode.STRICT).indent(true).indentCharacters("").newLineCharacters("").build();
    private static final JsonWriterSettings SIMPLE = JsonWriterSettings.builder()
            .outputMode(JsonMode.RELAXED).indent(true).indentCharacters("").newLineCharacters("").build();

    private Oracle() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1 || !args[0].matches("strict|relaxed|default|key|document|raw-strict|all")) {
            System.err.println("usage: Oracle strict|relaxed|default|key|document|raw-strict|all");
            System.exit(2);
        }
        String variant = args[0];
        DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(System.in, 1 << 16));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, "UTF-8");
        String[] variants = variant.equals("all")
                ? new String[] {"strict", "relaxed", "default", "key", "document"}
                : new String[] {variant};
        byte[] doc;
        while ((doc = readDocument(in)) != null) {
            RawBsonDocument raw = new RawBsonDocument(doc);
            /* Debezium holds documents as BsonDocument (change stream
             * fullDocument, documentKey, updatedFields; snapshot reads), a
             * map: a repeated field name keeps its first position and its
             * last value. Decode the same way before writing. */
            BsonDocument bdoc = new BsonDocumentCodec().decode(readerOf(raw),
                    DecoderContext.builder().build());
            for (String v : variants) {
                out.print(render(raw, bdoc, v));
                out.print('\n');
            }
        }
        out.flush();
    }

    private static BsonBinaryReader readerOf(RawBsonDocument raw) {
        ByteBuffer bytes = raw.getByteBuffer().asNIO();
        return new BsonBinaryReader(bytes);
    }

    private static String render(RawBsonDocument raw, BsonDocument bdoc, String variant) {
        switch (variant) {
            case "strict":
                return bdoc.toJson(COMPACT);
            case "relaxed":
                return bdoc.toJson(SIMPLE);
            case "default":
                return bdoc.toJson();
            case "raw-strict":
                return raw.toJson(COMPACT);
            case "key":
                BsonValue id = bdoc.get("_id");
                if (id == null) {
                    return "";
                }
                String wrapped = new BsonDocument("_", id).toJson(SIMPLE);
                return wrapped.substring(6, wrapped.length() - 1);
            case "document":
                Document d = new DocumentCodec().decode(readerOf(raw),
                        DecoderContext.builder().build());
                return d.toJson(COMPACT);
            default:
                throw new IllegalArgumentException("unknown variant " + variant);
        }
    }

    private static byte[] readDocument(DataInputStream in) throws IOException {
        byte[] len = new byte[4];
        int n = in.read(len, 0, 1);
        if (n < 0) {
            return null;
        }
        in.readFully(len, 1, 3);
        int size = (len[0] & 0xff) | (len[1] & 0xff) << 8 | (len[2] & 0xff) << 16 | (len[3] & 0xff) << 24;
        if (size < 5) {
            throw new EOFException("bad document size " + size);
        }
        byte[] doc = new byte[size];
        System.arraycopy(len, 0, doc, 0, 4);
        in.readFully(doc, 4, size - 4);
        return doc;
    }
}
