import com.google.common.hash.Hashing;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceBundles;
import org.apache.pulsar.common.naming.TopicName;
import org.apache.pulsar.common.policies.data.PoliciesUtil;
import org.apache.pulsar.metadata.api.MetadataStoreConfig;
import org.apache.pulsar.metadata.api.extended.MetadataStoreExtended;

/**
 * Answers, line by line, how the Pulsar broker's own classes read a topic name and which
 * bundle of a namespace created with N bundles it falls in. Input lines: N TAB hex(UTF-8 name).
 * Output lines: OK TAB hex(toString) TAB partitionIndex TAB hex(namespace) TAB hex(localName)
 * TAB bundle, or ERR TAB hex(exception class: message).
 */
public final class BrokerOracle {
    /** A broker that is never started: only what the bundle factory asks of it. */
    static final class Unstarted extends PulsarService {
        private final MetadataStoreExtended store;

        Unstarted(ServiceConfiguration config, MetadataStoreExtended store) {
            super(config);
            this.store = store;
        }

        @Override
        public MetadataStoreExtended getLocalMetadataStore() {
            return store;
        }
    }

    public static void main(String[] args) throws Exception {
        // answers own stdout; anything the broker's classes log goes to stderr
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
                StandardCharsets.UTF_8);
        System.setOut(System.err);
        ServiceConfiguration config = new ServiceConfiguration();
        config.setClusterName("oracle");
        MetadataStoreExtended store = MetadataStoreExtended.create("memory:oracle",
                MetadataStoreConfig.builder().build());
        PulsarService pulsar = new Unstarted(config, store);
        NamespaceBundleFactory factory = NamespaceBundleFactory.createFactory(pulsar, Hashing.crc32());
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("READY");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", -1);
            int bundles = Integer.parseInt(parts[0]);
            String name = new String(hex.parseHex(parts[1]), StandardCharsets.UTF_8);
            try {
                TopicName topic = TopicName.get(name);
                NamespaceBundles all = factory.getBundles(topic.getNamespaceObject(),
                        PoliciesUtil.getBundles(bundles));
                NamespaceBundle bundle = all.findBundle(topic);
                out.println("OK\t" + hex.formatHex(topic.toString().getBytes(StandardCharsets.UTF_8))
                        + "\t" + topic.getPartitionIndex()
                        + "\t" + hex.formatHex(topic.getNamespace().getBytes(StandardCharsets.UTF_8))
                        + "\t" + hex.formatHex(topic.getLocalName().getBytes(StandardCharsets.UTF_8))
                        + "\t" + bundle.getBundleRange());
            } catch (Exception e) {
                String text = e.getClass().getSimpleName() + ": " + e.getMessage();
                out.println("ERR\t" + hex.formatHex(text.getBytes(StandardCharsets.UTF_8)));
            }
            out.flush();
        }
    }
}
