//! Tic-tac-toe (multi-turn): the model plays a seeded opponent on a 3x3 board. The
//! opponent is part of the environment: who starts, and each of its moves (optimal by
//! minimax, or with probability 3/10 uniformly random), come from the challenge id's
//! stream, so two models facing one challenge id face the same opponent.
//!
//! Draws from the stream, in order: `below(2)` at reset (0: the agent moves first);
//! then for every opponent move `below(10)` (< 3: random move) and `below(count)` to pick
//! among the empty cells, or among the optimal ones, in increasing cell order.
//! X always moves first. Rewards: win +1, draw 0, loss -1; an illegal or unparsable
//! move is a loss.

use super::parse::extract_answer;
use super::rng::Prng;
use super::{
    done_observation, info, Action, EnvSpec, Environment, Episode, Info, Observation, ObservationData, Space, Step,
    Turns,
};
use crate::bytes::ChallengeId;
use std::fmt::Write;

pub const NAME: &str = "tictactoe";
pub const VERSION: u32 = 1;
/// The opponent plays a uniformly random move with probability 3/10.
pub const RANDOM_MOVE_NUMERATOR: u64 = 3;
pub const RANDOM_MOVE_DENOMINATOR: u64 = 10;

const EMPTY: u8 = 0;
const X: u8 = 1;
const O: u8 = 2;
const N_STATES: usize = 19_683; // 3^9
const LINES: [[usize; 3]; 8] = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]];

pub struct TicTacToe {
    spec: EnvSpec,
    /// Minimax value of every board for the player to move: 1 win, 0 draw, -1 loss.
    /// Built once per environment (a pure function of the board, not global state).
    values: Box<[i8; N_STATES]>,
}

impl Default for TicTacToe {
    fn default() -> Self {
        Self::new()
    }
}

pub fn winner(board: &[u8; 9]) -> Option<u8> {
    LINES
        .iter()
        .find_map(|&[a, b, c]| (board[a] != EMPTY && board[a] == board[b] && board[b] == board[c]).then_some(board[a]))
}

fn state_index(board: &[u8; 9]) -> usize {
    board.iter().rev().fold(0usize, |acc, &cell| acc * 3 + cell as usize)
}

fn to_move(board: &[u8; 9]) -> u8 {
    let xs = board.iter().filter(|&&c| c == X).count();
    let os = board.iter().filter(|&&c| c == O).count();
    if xs == os {
        X
    } else {
        O
    }
}

impl TicTacToe {
    pub fn new() -> TicTacToe {
        let mut values = Box::new([i8::MIN; N_STATES]);
        fill_values(&mut [EMPTY; 9], &mut values);
        TicTacToe {
            spec: EnvSpec {
                name: NAME,
                version: VERSION,
                description: "play tic-tac-toe against a seeded opponent (minimax with 30% random moves)",
                turns: Turns::Multi,
                action_kind: "cell",
                observation_space: Space::Board { cells: 9 },
                action_space: Space::Discrete { n: 9 },
                difficulty: format!("opponent_random_moves={RANDOM_MOVE_NUMERATOR}/{RANDOM_MOVE_DENOMINATOR}"),
                reward_min_milli: -1000,
                reward_max_milli: 1000,
                system_prompt: "You are playing tic-tac-toe. Play to win. Answer with the number of one empty cell.",
            },
            values,
        }
    }

    /// Minimax value of moving to `cell` for the player to move on `board`.
    fn move_value(&self, board: &[u8; 9], cell: usize) -> i8 {
        let mut child = *board;
        child[cell] = to_move(board);
        -self.values[state_index(&child)]
    }

    /// Empty cells whose minimax value is best, in increasing order.
    pub fn optimal_moves(&self, board: &[u8; 9]) -> Vec<usize> {
        let empty: Vec<usize> = (0..9).filter(|&c| board[c] == EMPTY).collect();
        let best = empty.iter().map(|&c| self.move_value(board, c)).max().unwrap_or(0);
        empty.into_iter().filter(|&c| self.move_value(board, c) == best).collect()
    }
}

/// Memoized minimax over all boards reachable from `board`.
fn fill_values(board: &mut [u8; 9], values: &mut [i8; N_STATES]) -> i8 {
    let index = state_index(board);
    if values[index] != i8::MIN {
        return values[index];
    }
    let value = if winner(board).is_some() {
        -1 // The previous mover completed a line.
    } else if board.iter().all(|&c| c != EMPTY) {
        0
    } else {
        let mark = to_move(board);
        let mut best = -1;
        for cell in 0..9 {
            if board[cell] == EMPTY {
                board[cell] = mark;
                best = best.max(-fill_values(board, values));
                board[cell] = EMPTY;
            }
        }
        best
    };
    values[index] = value;
    value
}

fn mark_char(mark: u8) -> char {
    match mark {
        X => 'X',
        O => 'O',
        _ => '.',
    }
}

pub fn render_board(board: &[u8; 9]) -> String {
    let mut text = String::with_capacity(40);
    for row in 0..3 {
        let _ = writeln!(
            text,
            " {} | {} | {}",
            mark_char(board[row * 3]),
            mark_char(board[row * 3 + 1]),
            mark_char(board[row * 3 + 2])
        );
    }
    text
}

const YOUR_MOVE: &str = "Reply with the number of an empty cell on the last line, as `Answer: <cell>`.";

struct TicTacToeEpisode<'a> {
    env: &'a TicTacToe,
    challenge_id: ChallengeId,
    prng: Prng,
    board: [u8; 9],
    agent_mark: u8,
    turn: u32,
    done: bool,
}

impl TicTacToeEpisode<'_> {
    fn opponent_move(&mut self) -> usize {
        let candidates: Vec<usize> = if self.prng.chance(RANDOM_MOVE_NUMERATOR, RANDOM_MOVE_DENOMINATOR) {
            (0..9).filter(|&c| self.board[c] == EMPTY).collect()
        } else {
            self.env.optimal_moves(&self.board)
        };
        assert!(!candidates.is_empty(), "the opponent moves only on a board with an empty cell");
        let cell = candidates[self.prng.below(candidates.len() as u64) as usize];
        self.board[cell] = 3 - self.agent_mark;
        cell
    }

    fn observation(&self, preface: &str) -> Observation {
        let text = format!("{preface}Board:\n{}\n{YOUR_MOVE}", render_board(&self.board));
        Observation { data: ObservationData::TicTacToe { board: self.board, agent_mark: self.agent_mark }, text }
    }

    fn end(&mut self, reward_milli: i32) -> Step {
        self.done = true;
        Step {
            observation: done_observation(),
            reward_milli,
            terminated: true,
            truncated: false,
            info: info(&self.env.spec, &self.challenge_id, self.turn),
        }
    }
}

impl Environment for TicTacToe {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info) {
        let mut prng = Prng::new(challenge_id);
        let agent_first = prng.below(2) == 0;
        let agent_mark = if agent_first { X } else { O };
        let mut episode = TicTacToeEpisode {
            env: self,
            challenge_id: *challenge_id,
            prng,
            board: [EMPTY; 9],
            agent_mark,
            turn: 0,
            done: false,
        };
        let mut intro = format!(
            "You play {} against an opponent playing {}. Cells are numbered:\n 0 | 1 | 2\n 3 | 4 | 5\n 6 | 7 | 8\n\n",
            mark_char(agent_mark),
            mark_char(3 - agent_mark)
        );
        if agent_first {
            intro.push_str("You move first.\n");
        } else {
            let cell = episode.opponent_move();
            let _ = writeln!(intro, "The opponent moved first and played {cell}.");
        }
        let observation = episode.observation(&intro);
        (Box::new(episode), observation, info(&self.spec, challenge_id, 0))
    }
}

/// Exactly one cell number 0-8.
pub fn parse_cell(text: &str) -> Action {
    match extract_answer(text) {
        Ok(answer) if answer.len() == 1 && (b'0'..=b'8').contains(&answer.as_bytes()[0]) => {
            Action::Cell(answer.as_bytes()[0] - b'0')
        }
        Ok(answer) => Action::Invalid(format!("not a cell number 0-8: {:?}", super::mult::truncate(answer))),
        Err(e) => Action::Invalid(e.to_string()),
    }
}

impl Episode for TicTacToeEpisode<'_> {
    fn parse_action(&self, text: &str) -> Action {
        parse_cell(text)
    }

    fn step(&mut self, action: &Action) -> Step {
        assert!(!self.done, "step after the episode ended");
        self.turn += 1;
        let cell = match action {
            Action::Cell(cell) if (*cell as usize) < 9 && self.board[*cell as usize] == EMPTY => *cell as usize,
            _ => return self.end(-1000),
        };
        self.board[cell] = self.agent_mark;
        if winner(&self.board).is_some() {
            return self.end(1000);
        }
        if self.board.iter().all(|&c| c != EMPTY) {
            return self.end(0);
        }
        let reply = self.opponent_move();
        if winner(&self.board).is_some() {
            return self.end(-1000);
        }
        if self.board.iter().all(|&c| c != EMPTY) {
            return self.end(0);
        }
        let observation = self.observation(&format!("You played {cell}. The opponent played {reply}.\n\n"));
        Step {
            observation,
            reward_milli: 0,
            terminated: false,
            truncated: false,
            info: info(&self.env.spec, &self.challenge_id, self.turn),
        }
    }

    fn expert_action(&self) -> Action {
        let moves = self.env.optimal_moves(&self.board);
        Action::Cell(moves.first().copied().expect("an unfinished game has a move") as u8)
    }
}
