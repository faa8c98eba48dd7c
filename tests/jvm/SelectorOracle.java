import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.broker.service.ConsistentHashingStickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.Consumer;
import org.apache.pulsar.broker.service.HashRangeAutoSplitStickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.HashRangeExclusiveStickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.StickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.TransportCnx;
import org.apache.pulsar.client.api.Range;
import org.apache.pulsar.common.api.proto.KeySharedMeta;
import org.apache.pulsar.common.api.proto.KeySharedMode;
import sun.misc.Unsafe;

/**
 * Drives the broker's own Key_Shared selectors, line by line, on consumers that carry only
 * what a selector reads of them: a name, an id, a connection and the sticky ranges. The same
 * source runs on 3.0 and 4.0; where their classes differ (how the ranges are listed) it
 * asks for either by reflection, in `ranges`.
 *
 * <p>Commands: NEW consistent POINTS | NEW auto-split | NEW sticky; ADD ID hex(name)
 * [START-END,...] (sticky ranges) answers OK or ERR hex(message); REMOVE ID answers OK;
 * RANGES answers ID:START-END,...;ID:... in the order the selector lists them; SELECT
 * hex(key) hex(key) ... answers the id each key reaches ("-" for none).
 */
public final class SelectorOracle {
    static Unsafe unsafe;
    static final Map<Consumer, String> ids = new HashMap<>();
    static final Map<String, Consumer> byId = new HashMap<>();

    static void set(Object target, String name, Object value) throws Exception {
        Field field = Consumer.class.getDeclaredField(name);
        field.setAccessible(true);
        field.set(target, value);
    }

    static Consumer consumer(long id, String name, String sticky) throws Exception {
        Consumer consumer = (Consumer) unsafe.allocateInstance(Consumer.class);
        InetSocketAddress address = new InetSocketAddress("127.0.0.1", (int) (1024 + id));
        Object cnx = Proxy.newProxyInstance(SelectorOracle.class.getClassLoader(),
                new Class<?>[] {TransportCnx.class}, (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "clientAddress": return address;
                        case "hashCode": return System.identityHashCode(proxy);
                        case "equals": return proxy == args[0];
                        case "toString": return "cnx-" + id;
                        case "checkConnectionLiveness": // alive: a conflict stays a conflict
                            return CompletableFuture.completedFuture(
                                    method.getGenericReturnType().getTypeName().contains("Optional")
                                            ? (Object) Optional.of(true) : (Object) true);
                        default: return null;
                    }
                });
        set(consumer, "consumerName", name);
        set(consumer, "consumerId", id);
        set(consumer, "cnx", cnx);
        KeySharedMeta meta = new KeySharedMeta().setKeySharedMode(
                sticky.isEmpty() ? KeySharedMode.AUTO_SPLIT : KeySharedMode.STICKY);
        for (String range : sticky.isEmpty() ? new String[0] : sticky.split(",")) {
            String[] ends = range.split("-");
            meta.addHashRange().setStart(Integer.parseInt(ends[0])).setEnd(Integer.parseInt(ends[1]));
        }
        set(consumer, "keySharedMeta", meta);
        return consumer;
    }

    /** 3.0: getConsumerKeyHashRanges(); 4.0: getConsumerHashAssignmentsSnapshot().getRangesByConsumer(). */
    @SuppressWarnings("unchecked")
    static Map<Consumer, List<Range>> ranges(StickyKeyConsumerSelector selector) throws Exception {
        try {
            Method listed = selector.getClass().getMethod("getConsumerKeyHashRanges");
            return (Map<Consumer, List<Range>>) listed.invoke(selector);
        } catch (NoSuchMethodException e) {
            Object snapshot = selector.getClass().getMethod("getConsumerHashAssignmentsSnapshot")
                    .invoke(selector);
            return (Map<Consumer, List<Range>>) snapshot.getClass().getMethod("getRangesByConsumer")
                    .invoke(snapshot);
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
                StandardCharsets.UTF_8);
        System.setOut(System.err);
        Field theUnsafe = Unsafe.class.getDeclaredField("theUnsafe");
        theUnsafe.setAccessible(true);
        unsafe = (Unsafe) theUnsafe.get(null);
        HexFormat hex = HexFormat.of();
        StickyKeyConsumerSelector selector = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        out.println("READY");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            StringBuilder text = new StringBuilder();
            switch (f[0]) {
                case "NEW":
                    ids.clear();
                    byId.clear();
                    selector = f[1].equals("consistent")
                            ? new ConsistentHashingStickyKeyConsumerSelector(Integer.parseInt(f[2]))
                            : f[1].equals("auto-split") ? new HashRangeAutoSplitStickyKeyConsumerSelector()
                            : new HashRangeExclusiveStickyKeyConsumerSelector();
                    text.append("OK");
                    break;
                case "ADD":
                    Consumer added = consumer(Long.parseLong(f[1]),
                            new String(hex.parseHex(f[2]), StandardCharsets.UTF_8), f.length > 3 ? f[3] : "");
                    try {
                        selector.addConsumer(added).join();
                        ids.put(added, f[1]);
                        byId.put(f[1], added);
                        text.append("OK");
                    } catch (Exception e) {
                        Throwable cause = e.getCause() != null ? e.getCause() : e;
                        text.append("ERR ").append(hex.formatHex(String.valueOf(cause.getMessage())
                                .getBytes(StandardCharsets.UTF_8)));
                    }
                    break;
                case "REMOVE":
                    selector.removeConsumer(byId.remove(f[1]));
                    text.append("OK");
                    break;
                case "RANGES":
                    for (Map.Entry<Consumer, List<Range>> entry : ranges(selector).entrySet()) {
                        text.append(text.length() == 0 ? "" : ";").append(ids.get(entry.getKey())).append(':');
                        for (int i = 0; i < entry.getValue().size(); i++) {
                            Range range = entry.getValue().get(i);
                            text.append(i == 0 ? "" : ",").append(range.getStart()).append('-').append(range.getEnd());
                        }
                    }
                    break;
                case "SELECT":
                    for (int i = 1; i < f.length; i++) {
                        Consumer chosen = selector.select(hex.parseHex(f[i]));
                        text.append(i == 1 ? "" : " ").append(chosen == null ? "-" : ids.get(chosen));
                    }
                    break;
                default:
                    text.append("ERR ").append(hex.formatHex(("unknown command " + f[0]).getBytes(StandardCharsets.UTF_8)));
            }
            out.println(text);
            out.flush();
        }
    }
}
