package pulsar_lens.spark;

import org.apache.spark.sql.api.java.UDF1;

/**
 * The 31-bit murmur3 of a sticky key inside Spark: murmur3 x86_32, seed 0, masked to 31 bits,
 * as the broker's {@code org.apache.pulsar.common.util.Murmur3_32Hash#makeHash(byte[])}
 * computes it (tests/jvm proves the two equal). Called on the key's UTF-8 bytes
 * ({@code CAST(key AS BINARY)}); a null key hashes as the empty key. The selector's reduction
 * of the value is left to Spark's expressions (plugins/spark/hashing.py).
 *
 * Compiled at set-up or on first use by plugins/spark/jvm.py, never shipped as a jar.
 */
public final class StickyKeyHash implements UDF1<byte[], Integer> {
    private static final long serialVersionUID = 1L;
    private static final int C1 = 0xcc9e2d51;
    private static final int C2 = 0x1b873593;

    @Override
    public Integer call(byte[] key) {
        return key == null ? 0 : hash31(key);
    }

    /** murmur3 x86_32 of {@code data} with seed 0, masked to 31 bits. */
    public static int hash31(byte[] data) {
        int length = data.length;
        int blocks = length & ~3;
        int h1 = 0;
        for (int i = 0; i < blocks; i += 4) {
            int k1 = (data[i] & 0xff)
                    | (data[i + 1] & 0xff) << 8
                    | (data[i + 2] & 0xff) << 16
                    | (data[i + 3] & 0xff) << 24;
            h1 ^= mixK1(k1);
            h1 = Integer.rotateLeft(h1, 13) * 5 + 0xe6546b64;
        }
        int k1 = 0;
        switch (length & 3) {
            case 3:
                k1 ^= (data[blocks + 2] & 0xff) << 16;
                // fall through
            case 2:
                k1 ^= (data[blocks + 1] & 0xff) << 8;
                // fall through
            case 1:
                k1 ^= data[blocks] & 0xff;
                h1 ^= mixK1(k1);
                break;
            default:
                break;
        }
        h1 ^= length;
        h1 ^= h1 >>> 16;
        h1 *= 0x85ebca6b;
        h1 ^= h1 >>> 13;
        h1 *= 0xc2b2ae35;
        h1 ^= h1 >>> 16;
        return h1 & 0x7fffffff;
    }

    private static int mixK1(int k1) {
        k1 *= C1;
        k1 = Integer.rotateLeft(k1, 15);
        return k1 * C2;
    }
}
