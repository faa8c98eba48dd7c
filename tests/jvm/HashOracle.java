import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.pulsar.common.util.Murmur3_32Hash;
import pulsar_lens.spark.StickyKeyHash;

/**
 * Hashes each key with the broker's own {@code Murmur3_32Hash} and with the Spark UDF
 * (plugins/spark/jvm/StickyKeyHash.java, as Spark calls it). Input lines: "B hex(bytes)", or
 * "S hex(UTF-16BE code units)" for a Java string, which is encoded as the Java client and
 * Spark's UTF8String encode it ({@code getBytes(UTF_8)}: a lone surrogate becomes '?').
 * Output lines: hex(bytes hashed) SPACE broker's hash SPACE the UDF's hash.
 */
public final class HashOracle {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        StickyKeyHash udf = new StickyKeyHash();
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        out.println("READY");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            byte[] given = hex.parseHex(line.substring(2));
            byte[] key = line.startsWith("S ") ? javaString(given).getBytes(StandardCharsets.UTF_8) : given;
            int broker = Murmur3_32Hash.getInstance().makeHash(key);
            out.println(hex.formatHex(key) + " " + broker + " " + udf.call(key));
            out.flush();
        }
    }

    /** The string of these UTF-16BE code units as they are (a decoder would replace a lone
     * surrogate with U+FFFD before the encoder saw it). */
    private static String javaString(byte[] units) {
        char[] chars = new char[units.length / 2];
        for (int i = 0; i < chars.length; i++) {
            chars[i] = (char) ((units[2 * i] & 0xff) << 8 | (units[2 * i + 1] & 0xff));
        }
        return new String(chars);
    }
}
