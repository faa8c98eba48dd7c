// Runs several `pulsar-admin` commands in one JVM: the real tool, PulsarAdminTool.execute
// (what bin/pulsar-admin's main calls), once per command, each command's standard output
// into its own file. Started by lab/admintool.py as a single-file source program:
//   java -cp '<admin tool jars>/*' AdminBatch.java CLIENT_CONF COMMANDS_FILE
// COMMANDS_FILE has one command a line: the output file, a tab, the arguments tab-separated.
// Exit status: 0 when every command succeeded, 1 otherwise (each failure is said on stderr).

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

public class AdminBatch {
    public static void main(String[] args) throws Exception {
        Class<?> tool = Class.forName("org.apache.pulsar.admin.cli.PulsarAdminTool");
        Field allowExit = tool.getDeclaredField("allowSystemExit");
        allowExit.setAccessible(true);
        allowExit.setBoolean(null, false); // each command ends in exit(code): keep the JVM
        Method lastExitCode = tool.getDeclaredMethod("getLastExitCode");
        lastExitCode.setAccessible(true);
        Method execute = tool.getMethod("execute", String[].class);
        PrintStream out = System.out;
        int failed = 0;
        for (String line : Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            String[] parts = line.split("\t");
            String[] command = new String[parts.length];
            command[0] = args[0];
            System.arraycopy(parts, 1, command, 1, parts.length - 1);
            int code;
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            try {
                execute.invoke(null, (Object) command);
                code = (int) lastExitCode.invoke(null);
            } catch (Exception e) {
                e.printStackTrace();
                code = -1;
            } finally {
                System.out.flush();
                System.setOut(out);
            }
            // with System.exit off, the tool ends its output with a line of its own
            String text = printed.toString(StandardCharsets.UTF_8)
                    .replaceFirst("(?m)^Exit code is -?\\d+ \\(System\\.exit not called.*\\R?\\z", "");
            Files.writeString(Path.of(parts[0]), text, StandardCharsets.UTF_8);
            if (code != 0) {
                System.err.println("pulsar-admin failed (" + code + "): " + line);
                failed++;
            }
        }
        System.exit(failed == 0 ? 0 : 1);
    }
}
