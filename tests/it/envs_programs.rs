//! ABD and DED against the real thing: 5,000 generated programs run by the machine's
//! CPython on the generator's input and two perturbed inputs (in one interpreter process,
//! each program exec'd with its own stdin line and stdout, under a CPU and memory limit);
//! CPython's output, or its exception's name, must equal our evaluator's exactly. Then the
//! reference policy from the prompt alone, random answers, and hostile answers.

use af::envs::programs;
use af::envs::pyprog::{self, RunError};
use af::envs::{self, challenge_id_for_seed, Action};
use std::io::Write;
use std::process::{Command, Stdio};

const N_PROGRAMS: u64 = 5_000;

/// Runs every (source, input line) pair in one CPython process; returns, per pair,
/// `Ok(stdout)` or `Err(exception class name)`.
fn cpython(cases: &[(String, String)]) -> Vec<Result<String, String>> {
    let harness = r#"
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (240, 240))
sys.setrecursionlimit(200)
for line in sys.stdin:
    case = json.loads(line)
    out = io.StringIO()
    env = {"__name__": "__main__", "input": (lambda text=case["input"]: text)}
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(case["source"], "<program>", "exec"), env)
        result = {"out": out.getvalue()}
    except Exception as error:
        result = {"exc": type(error).__name__}
    print(json.dumps(result), flush=True)
"#;
    let mut child = Command::new("python3")
        .args(["-I", "-c", harness])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (CI has it)");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = cases
        .iter()
        .map(|(source, line)| serde_json::json!({ "source": source, "input": line }).to_string() + "\n")
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(output.status.success(), "the CPython harness failed");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            match v.get("out") {
                Some(out) => Ok(out.as_str().unwrap().to_string()),
                None => Err(v["exc"].as_str().unwrap().to_string()),
            }
        })
        .collect()
}

#[test]
fn the_evaluator_agrees_with_cpython_on_5000_programs() {
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for seed in 0..N_PROGRAMS {
        let id = challenge_id_for_seed(programs::DED, programs::VERSION, seed);
        let task = programs::task(&id);
        let source = task.program.source();
        // The hidden input, every value shifted (negatives included), and one value more.
        let shifted: Vec<i128> = task.input.iter().map(|v| v * 37 - 500 + seed as i128 % 7).collect();
        let mut longer = task.input.clone();
        longer.push(-(seed as i128 % 1000));
        for input in [task.input.clone(), shifted, longer] {
            let line = input.iter().map(i128::to_string).collect::<Vec<_>>().join(" ");
            assert_eq!(pyprog::parse_input(&line).as_ref(), Some(&input), "{line}");
            ours.push(task.program.run(&input));
            cases.push((source.clone(), line));
        }
    }
    let theirs = cpython(&cases);
    assert_eq!(theirs.len(), cases.len(), "CPython answered every case");
    let mut exceptions = 0;
    for (i, (ours, theirs)) in ours.iter().zip(&theirs).enumerate() {
        let (source, line) = &cases[i];
        match (ours, theirs) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "case {i}, input {line:?}:\n{source}"),
            (Err(RunError::Exception(a)), Err(b)) => {
                assert_eq!(a, b, "case {i}, input {line:?}:\n{source}");
                exceptions += 1;
            }
            (ours, theirs) => panic!("case {i}, input {line:?}: ours {ours:?}, CPython {theirs:?}\n{source}"),
        }
    }
    // The generator's own input never fails (the rejection step), so errors come only from
    // the perturbed inputs; they must exist, or this test would not cover error semantics.
    assert!(exceptions > 0 && exceptions < cases.len() / 3, "{exceptions} exceptions");
    eprintln!("{} runs of {N_PROGRAMS} programs: all equal to CPython ({exceptions} exceptions)", cases.len());
}

#[test]
fn the_reference_policy_solves_from_the_prompt_and_random_answers_do_not() {
    let registry = envs::registry();
    let solver = af::miner::policy::Solver::new();
    for name in [programs::ABD, programs::DED] {
        let env = registry.get(name).unwrap();
        let (mut perfect, mut random) = (0, 0);
        for seed in 0..1_000u64 {
            let id = challenge_id_for_seed(name, programs::VERSION, seed);
            let answer_seed = af::bytes::Hash32([seed as u8; 32]);
            let record = envs::run_episode(env, &id, &mut |messages| {
                solver.answer(af::miner::policy::Policy::Perfect, messages, &answer_seed)
            });
            perfect += i32::from(record.reward_milli == 1000);
            let record = envs::run_episode(env, &id, &mut |messages| {
                solver.answer(af::miner::policy::Policy::Random, messages, &answer_seed)
            });
            random += i32::from(record.reward_milli == 1000);
        }
        assert_eq!(perfect, 1000, "{name}: the perfect policy solves every task");
        assert!(random < 50, "{name}: random answers solved {random} of 1000");
        eprintln!("{name}: perfect 1000 of 1000, random {random} of 1000");
    }
}

#[test]
fn hostile_answers_score_zero_without_panic() {
    let registry = envs::registry();
    let huge_number = "9".repeat(5000);
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    let million_lines = "1\n".repeat(1_000_000);
    let hostile = [
        format!("<INPUT>{huge_number}</INPUT>"),
        format!("<INPUT>{deep}</INPUT>"),
        "<INPUT>1 2 3 4 5 6 7 8 9 10</INPUT>".to_string(),
        format!("<INPUT>{million_lines}</INPUT>"),
        format!("<OUTPUT>{million_lines}</OUTPUT>"),
        format!("<OUTPUT>{huge_number}</OUTPUT>"),
        "<INPUT>\u{0}\u{fffd}\u{202e}</INPUT>".to_string(),
        "<INPUT>1e3 0x10 1_000 +5</INPUT>".to_string(),
        "<INPUT></INPUT><OUTPUT></OUTPUT>".to_string(),
        "</INPUT>1 2<INPUT>".to_string(),
    ];
    for name in [programs::ABD, programs::DED] {
        let env = registry.get(name).unwrap();
        for seed in 0..20u64 {
            let id = challenge_id_for_seed(name, programs::VERSION, seed);
            for answer in &hostile {
                let (mut episode, _, _) = env.reset(&id);
                let action = episode.parse_action(answer);
                let step = episode.step(&action);
                assert_eq!(step.reward_milli, 0, "{name} seed {seed}: {:?}", &answer[..answer.len().min(40)]);
            }
        }
    }
    // Any input of the documented shape runs to an end within the bounds: extremes too.
    for seed in 0..300u64 {
        let task = programs::task(&challenge_id_for_seed(programs::ABD, programs::VERSION, seed));
        for input in [vec![1000; 8], vec![-1000; 8], vec![0], vec![-1000, 1000, -999, 999, -1, 1, 0, 7]] {
            match task.program.run(&input) {
                Ok(_) | Err(RunError::Exception(_)) => {}
                Err(RunError::Bound(why)) => panic!("seed {seed}: a bound was reached on an allowed input: {why}"),
            }
        }
    }
    // The expert action and its answer text agree with the scorer.
    let env = registry.get(programs::ABD).unwrap();
    let (episode, _, _) = env.reset(&challenge_id_for_seed(programs::ABD, programs::VERSION, 1));
    assert!(matches!(episode.expert_action(), Action::Input(_)));
}
