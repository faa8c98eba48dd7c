import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.impl.conf.ClientConfigurationData;
import org.apache.pulsar.client.impl.conf.ProducerConfigurationData;
import org.apache.pulsar.common.util.Backoff;
import org.apache.pulsar.common.util.BackoffBuilder;

/**
 * Answers, line by line, what the Pulsar client's own reconnect backoff returns.
 *
 * <p>DEFAULTS prints the client's defaults in ms: initial backoff, max backoff, producer send
 * timeout. RUN mode initial max stop seed runs steps attempt resetAt seeds the backoff's shared
 * Random, then prints one line per run with the delays of `steps` next() calls on a fresh
 * Backoff, and END. mode "builder" builds it as the client does (BackoffBuilder, system clock:
 * deterministic only when the mandatory stop fires on the first call); mode "clock" uses the
 * constructor that takes a Clock, advanced by each delay plus `attempt` ms, so the mandatory
 * stop sees exactly that elapsed time. With resetAt > 0, reset() is called after that many calls.
 */
public final class BackoffOracle {
    /** A clock that moves only when told to. */
    static final class ManualClock extends Clock {
        long millis = 1_700_000_000_000L;

        @Override
        public ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
            return this;
        }

        @Override
        public long millis() {
            return millis;
        }

        @Override
        public Instant instant() {
            return Instant.ofEpochMilli(millis);
        }
    }

    public static void main(String[] args) throws Exception {
        // answers own stdout; anything the client's classes log goes to stderr
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
                StandardCharsets.UTF_8);
        System.setOut(System.err);
        Field shared = Backoff.class.getDeclaredField("random");
        shared.setAccessible(true);
        Random random = (Random) shared.get(null);
        Constructor<Backoff> withClock = Backoff.class.getDeclaredConstructor(long.class,
                TimeUnit.class, long.class, TimeUnit.class, long.class, TimeUnit.class, Clock.class);
        withClock.setAccessible(true);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("READY");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            if (f[0].equals("DEFAULTS")) {
                ClientConfigurationData client = new ClientConfigurationData();
                ProducerConfigurationData producer = new ProducerConfigurationData();
                out.println("DEFAULTS " + TimeUnit.NANOSECONDS.toMillis(client.getInitialBackoffIntervalNanos())
                        + " " + TimeUnit.NANOSECONDS.toMillis(client.getMaxBackoffIntervalNanos())
                        + " " + producer.getSendTimeoutMs());
            } else if (f[0].equals("RUN")) {
                boolean clocked = f[1].equals("clock");
                long initial = Long.parseLong(f[2]);
                long max = Long.parseLong(f[3]);
                long stop = Long.parseLong(f[4]);
                random.setSeed(Long.parseLong(f[5]));
                int runs = Integer.parseInt(f[6]);
                int steps = Integer.parseInt(f[7]);
                long attempt = Long.parseLong(f[8]);
                int resetAt = Integer.parseInt(f[9]);
                StringBuilder text = new StringBuilder();
                for (int run = 0; run < runs; run++) {
                    ManualClock clock = new ManualClock();
                    Backoff backoff = clocked
                            ? withClock.newInstance(initial, TimeUnit.MILLISECONDS, max,
                                    TimeUnit.MILLISECONDS, stop, TimeUnit.MILLISECONDS, clock)
                            : new BackoffBuilder().setInitialTime(initial, TimeUnit.MILLISECONDS)
                                    .setMax(max, TimeUnit.MILLISECONDS)
                                    .setMandatoryStop(stop, TimeUnit.MILLISECONDS).create();
                    for (int step = 0; step < steps; step++) {
                        if (resetAt > 0 && step == resetAt) {
                            backoff.reset();
                        }
                        long delay = backoff.next();
                        clock.millis += delay + attempt;
                        text.append(step == 0 ? "" : " ").append(delay);
                    }
                    text.append('\n');
                }
                out.print(text);
                out.println("END");
            } else {
                out.println("ERR unknown command " + f[0]);
            }
            out.flush();
        }
    }
}
